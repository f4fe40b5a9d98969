"""Server-sent events: the message format, and the poll loop every stream runs until the
server shuts down."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from longcall.shapes import Shape


def message(event: str, data: Shape, event_id: str | None = None) -> bytes:
    """One server-sent event; JSON on one line, so it needs one ``data:`` field."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data.dumped(), separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def stream(messages: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        messages,
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def ticks(request: Request) -> AsyncIterator[bool]:
    """Yield once per poll until shutdown; True when a keepalive comment is due."""
    settings = request.app.state.settings
    quiet = 0.0
    while not request.app.state.closing.is_set():
        quiet += settings.poll
        keepalive = quiet >= settings.keepalive
        if keepalive:
            quiet = 0.0
        yield keepalive
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(request.app.state.closing.wait(), settings.poll)
