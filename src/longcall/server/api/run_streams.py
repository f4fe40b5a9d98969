"""``GET /v1/runs/{runId}/streams/{streamKey}``: a run's stream (``ctx.stream``), live.

The run is found as the other run endpoints find it: a user's token reaches only that user's
runs (any other answers 404, as an unknown run does). With ``Accept: text/event-stream`` the
answer is server-sent events: ``event: item`` per value, its ``id:`` the item's seq, then
``event: end`` once the run closed the stream or finished. A client that reconnects sends
``Last-Event-ID`` (or ``?after=``) and gets the items after that seq, none twice, none lost.
Without it, the answer is one page of JSON: the items there are now, and whether that is all.

The stream looks at the store 5 ms after an item, backing off to 20 ms within a second of it
and to 200 ms once quiet, so a token streamed from a task in another process arrives within
one look; keepalive comments go out on a quiet stream, and it ends when the server shuts
down.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longcall.app import App
from longcall.errors import RunNotFound
from longcall.server.api.operation import Answer, Operation, query
from longcall.server.api.requests import whole_number
from longcall.server.api.runs import _authorized, visible_run
from longcall.server.api.streams import message, stream, wants_stream
from longcall.server.auth import Principal
from longcall.server.errors import error
from longcall.shapes import Shape

POLL_MIN = 0.005
POLL_ACTIVE = 0.02  # within ACTIVE_FOR of the last item (a token stream pausing)
ACTIVE_FOR = 1.0
POLL_MAX = 0.2
PAGE = 500


class StreamItem(Shape):
    """A value the run wrote to the stream: ``seq`` is its position (resume after it);
    ``attempt`` is null for the workflow body's writes, else the task attempt that wrote it
    (a new attempt of the same task means the one before stopped part-way)."""

    seq: int
    value: Any = None
    attempt: str | None = None


class StreamEnd(Shape):
    """The stream is over: the run closed it or finished. ``lastSeq``: its last item's seq
    (0: none)."""

    run_id: str
    key: str
    last_seq: int


class StreamPage(Shape):
    """The stream's items after ``after`` as they are now; ``ended``: no more will come."""

    items: list[StreamItem]
    ended: bool


def _start(request: Request) -> int | Response:
    header = request.headers.get("last-event-id")
    text = header if header is not None else request.query_params.get("after", "0")
    if not whole_number(text):
        field = "Last-Event-ID" if header is not None else "after"
        return error(422, "invalid_query", f"{field} is an item's seq (a whole number)", field)
    return int(text)


async def read(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    key: str = request.path_params["stream_key"]
    start = _start(request)
    if isinstance(start, Response):
        return start
    if not wants_stream(request):
        items, ended = await app.in_thread(app.stream_items, run.run_id, key, after=start)
        page = StreamPage(
            items=[StreamItem(seq=i.seq, value=i.value, attempt=i.attempt) for i in items],
            ended=ended,
        )
        return JSONResponse(page.dumped())
    closing: asyncio.Event = request.app.state.closing
    keepalive: float = request.app.state.settings.keepalive

    async def messages() -> AsyncIterator[bytes]:
        after, wait = start, POLL_MIN
        quiet_since = last_item = time.monotonic()
        while not closing.is_set():
            try:
                items, ended = await app.in_thread(
                    app.stream_items, run.run_id, key, after=after, limit=PAGE
                )
            except RunNotFound:  # pruned (or deleted) while the stream was open
                items, ended = [], True
            for item in items:
                after = item.seq
                shape = StreamItem(seq=item.seq, value=item.value, attempt=item.attempt)
                yield message("item", shape, str(item.seq))
            if ended:
                yield message("end", StreamEnd(run_id=run.run_id, key=key, last_seq=after))
                return
            if items:
                wait, quiet_since = POLL_MIN, time.monotonic()
                last_item = quiet_since
                continue
            if time.monotonic() - quiet_since >= keepalive:
                quiet_since = time.monotonic()
                yield b": keepalive\n\n"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), wait)
            cap = POLL_ACTIVE if time.monotonic() - last_item < ACTIVE_FOR else POLL_MAX
            wait = min(wait * 2, cap)

    return stream(messages())


OPERATIONS = (
    Operation(
        "GET",
        "/v1/runs/{run_id:path}/streams/{stream_key}",
        _authorized(read),
        tag="runs",
        summary="A stream the run writes (ctx.stream); live with Accept: text/event-stream.",
        description="As server-sent events: `event: item` per value with `id:` its seq, then "
        "`event: end` once the run closed the stream or finished; reconnect with "
        "Last-Event-ID (or `after`) to go on after the last item seen. As JSON: the items "
        "there are now.",
        params=(query("after", "Only items after this seq.", {"type": "integer"}),),
        answers={200: Answer("The items, or their stream.", StreamPage, stream=True)},
        refusals=(401, 404, 422, 503),
        reasons={
            404: "No such run, or not one the caller may see.",
            422: "The stream key, `after` or Last-Event-ID is wrong; `field` names it.",
        },
    ),
)
