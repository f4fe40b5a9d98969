"""Server-sent event streams: one job's event log, and every job change a caller may see.

Streams poll the store, so they see changes made by any process (other servers, workers, the
CLI) the same way. ``/v1/events`` follows jobs by their ``updated_at``; a transaction can
commit a little after the time it stamped, so each poll looks ``LOOKBACK`` seconds behind the
newest change it sent and skips the versions it has already sent. After a reconnect a job may
arrive twice: each message is the job's whole state, and the newest one wins.

Every stream ends when the server starts shutting down (``state.closing``): uvicorn waits for
open connections before it exits, and a stream never ends by itself.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import Job
from longcall.server.api import models
from longcall.server.api.jobs import job_events, visible_job
from longcall.server.api.operation import Answer, Operation, query
from longcall.server.api.requests import authorized, whole_number
from longcall.server.api.streams import message, stream, ticks, wants_stream
from longcall.server.auth import Principal
from longcall.server.change_feed import LOOKBACK, PAGE, ChangeFeed, JobWatch
from longcall.server.errors import error
from longcall.shapes import Event
from longcall.shapes import Job as JobShape


async def job_stream(request: Request, app: App, who: Principal) -> Response:
    """``GET /v1/jobs/{jobId}/events``: the event log as JSON, or live with Last-Event-ID."""
    if not wants_stream(request):
        return await job_events(request, app, who)
    job = await visible_job(app, who, request.path_params["job_id"])
    start = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if not whole_number(start):
        return error(422, "invalid_query", "Last-Event-ID is an event's seq number", "after")
    feed: ChangeFeed = request.app.state.changes

    async def messages() -> AsyncIterator[bytes]:
        after, seen = int(start), job.updated_at
        yield message("job", JobShape.of(job))
        async with feed.following():
            watch = JobWatch(feed, job.job_id)
            async for keepalive in ticks(request):
                sent = False
                if watch.due():
                    for event in await app.job_events_async(job.job_id, after=after):
                        after = event.seq
                        sent = True
                        yield message("event", Event.of(event), str(event.seq))
                    current = await app.get_job_async(job.job_id)
                    if current.updated_at != seen:
                        seen, sent = current.updated_at, True
                        yield message("job", JobShape.of(current))
                if keepalive and not sent:
                    yield b": keepalive\n\n"

    return stream(messages())


def _job_message(job: Job) -> bytes:
    return message("job", JobShape.of(job), _cursor_of(job))


def _cursor_of(job: Job) -> str:
    text = json.dumps([job.updated_at, job.job_id])
    return base64.urlsafe_b64encode(text.encode()).decode()


def _read_cursor(text: str) -> tuple[float, str] | None:
    try:
        at, job_id = json.loads(base64.urlsafe_b64decode(text.encode()))
        return float(at), str(job_id)
    except (ValueError, TypeError, binascii.Error):
        return None


async def all_events(request: Request, app: App, who: Principal) -> Response:
    """``GET /v1/events``: every change to a job the caller may see, as it happens."""
    q = request.query_params
    filters = {
        "user_id": None if who.admin else who.user_id,
        "session_id": q.get("session"),
        "tool_name": q.get("tool"),
    }
    resume = request.headers.get("last-event-id") or q.get("cursor")
    start = _read_cursor(resume) if resume else None
    if resume and start is None:
        return error(422, "invalid_query", "Last-Event-ID is not a cursor this API gave", "cursor")

    def visible(job: Job) -> bool:
        return all(
            wanted is None or getattr(job, field) == wanted for field, wanted in filters.items()
        )

    async def caught_up(since: float) -> list[Job]:
        """The changes from a resumed cursor on, read by this stream alone (once)."""
        found: list[Job] = []
        after_id = ""
        while True:
            page = await app.in_thread(
                app.monitor.changed_jobs, since, after_id, limit=PAGE, **filters
            )
            found += page
            if len(page) < PAGE:
                return found
            since, after_id = page[-1].updated_at, page[-1].job_id

    feed: ChangeFeed = request.app.state.changes
    # Where the stream starts is settled before the answer goes out: a change made once the
    # client saw the stream open is one it must be sent.
    await feed.ready()
    sent: dict[str, float] = {}  # job id -> the version (updated_at) last sent
    backlog: list[Job] = []
    if start is None:
        # From now on: what already happened is in GET /v1/jobs.
        for job in feed.changed_since(feed.newest - LOOKBACK):
            if visible(job):
                sent[job.job_id] = job.updated_at
        high = feed.newest
    else:
        backlog = await caught_up(start[0] - LOOKBACK)
        high = start[0]

    async def messages() -> AsyncIterator[bytes]:
        nonlocal high
        pending = backlog
        async with feed.following():
            async for keepalive in ticks(request):
                feed.check()
                recent, pending = pending + feed.changed_since(high - LOOKBACK), []
                quiet = True
                for job in recent:
                    if visible(job) and sent.get(job.job_id) != job.updated_at:
                        sent[job.job_id] = job.updated_at
                        high = max(high, job.updated_at)
                        quiet = False
                        yield feed.encoded(job, _job_message)
                for job_id in [k for k, at in sent.items() if at < high - LOOKBACK]:
                    del sent[job_id]
                if keepalive and quiet:
                    yield b": keepalive\n\n"

    return stream(messages())


OPERATIONS = (
    Operation(
        "GET",
        "/v1/events",
        authorized(all_events),
        tag="jobs",
        summary="A stream of every change to a job the caller may see.",
        description="Server-sent events: `event: job`, the whole job as data, `id:` a cursor; "
        "reconnect with Last-Event-ID.",
        params=(
            query("session", "Only jobs of this session."),
            query("tool", "Only jobs of this tool."),
        ),
        answers={200: Answer("The stream.", media="text/event-stream")},
        refusals=(401, 422, 503),
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id:path}/events",
        authorized(job_stream),
        tag="jobs",
        summary="The job's event log; live with Accept: text/event-stream.",
        description="As a stream: `event: job` messages carry the job, `event: event` messages "
        "a log entry with `id:` its seq; reconnect with Last-Event-ID.",
        answers={200: Answer("The log, or its stream.", models.Events, stream=True)},
        refusals=(401, 404, 422, 503),
    ),
)
