"""``/v1/queues``: the named queues, their limits and what each holds now.

Any token may ask: it names queues and counts runs, no user's data. ``depth`` is the runs
queued (ready or not yet due); ``counts`` has every status of the runs not finished
(``queued``, ``running``, ``waiting_input``, ``sleeping``); ``oldestQueuedAgeSecs`` is how
long the oldest queued run has waited.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.queues import QueueStats
from longcall.server.api.models import QueueInfo, QueueLimits, QueueList
from longcall.server.api.operation import Answer, Operation
from longcall.server.api.requests import authorized, reply
from longcall.server.auth import Principal


def queue_info(stats: QueueStats) -> QueueInfo:
    queue = stats.queue
    return QueueInfo(
        name=queue.name,
        limits=QueueLimits(
            concurrency=queue.concurrency,
            worker_concurrency=queue.worker_concurrency,
            rate=queue.rate,
            priority=queue.priority,
        ),
        counts=dict(stats.counts),
        depth=stats.depth,
        oldest_queued_age_secs=stats.oldest_queued_age,
    )


async def list_queues(request: Request, app: App, who: Principal) -> Response:
    stats = await app.in_thread(app.queue_stats)
    return reply(QueueList(queues=[queue_info(s) for s in stats]))


OPERATIONS = (
    Operation(
        "GET",
        "/v1/queues",
        authorized(list_queues),
        tag="runs",
        summary="The named queues: limits, runs by status, the oldest queued run's age.",
        description="Queues are declared by the app (`app.queue`); their limits hold across "
        "every worker. Only running runs count against `concurrency`.",
        answers={200: Answer("Every declared queue, by name.", QueueList)},
        refusals=(401, 503),
    ),
)
