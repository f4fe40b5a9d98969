"""``/v1/workers``: the workers alive and the workflows each can run.

A worker beats as it sweeps (:mod:`longcall.worker`); one whose last beat has expired is not
listed. The dashboard asks this to tell a queued run that no live worker can take from one
waiting its turn. Any token may ask: it names workers and workflows, no user's data.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.workers import WorkerInfo
from longcall.server.api.models import Worker, WorkerList
from longcall.server.api.operation import Answer, Operation
from longcall.server.api.requests import authorized, reply
from longcall.server.auth import Principal
from longcall.shapes import iso


def _worker(worker: WorkerInfo) -> Worker:
    return Worker(
        worker_id=worker.worker_id,
        workflows=list(worker.workflows),
        started_at=iso(worker.started_at),
        heartbeat_at=iso(worker.heartbeat_at),
        expires_at=iso(worker.expires_at),
    )


def runnable(workers: Iterable[WorkerInfo]) -> set[str]:
    """The workflows at least one of ``workers`` can run."""
    return {name for worker in workers for name in worker.workflows}


async def list_workers(request: Request, app: App, who: Principal) -> Response:
    workers = await app.in_thread(app.monitor.workers)
    return reply(WorkerList(workers=[_worker(w) for w in workers]))


OPERATIONS = (
    Operation(
        "GET",
        "/v1/workers",
        authorized(list_workers),
        tag="runs",
        summary="The workers alive and the workflows each can run.",
        description="A worker beats as it sweeps, every few seconds; one whose last beat has "
        "expired is not listed. A queued run whose workflow no worker here can run waits until "
        "one that can starts.",
        answers={200: Answer("The live workers, oldest first.", WorkerList)},
        refusals=(401, 503),
    ),
)
