"""The dashboard's live streams: server-sent events whose data is HTML rendered by the same
templates as the page, each piece carrying the id of the element it replaces (htmx's SSE
extension swaps them in, out of band). Nothing is rendered in the browser.

A stream polls on the cadence of the API's streams (:mod:`longcall.server.api.events`) and ends
with them when the server shuts down; it sends "live" in the header first, and ends itself
(telling the page to stop reconnecting) once what it shows can no longer change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import StreamingResponse

from longcall.errors import StoreError
from longcall.server.api import streams
from longcall.server.change_feed import ChangeFeed
from longcall.server.dashboard._render import fragment

NOTHING = Markup()


@dataclass(frozen=True, slots=True)
class Update:
    """What one look at the store found: the pieces to swap in (empty: nothing changed), and
    whether that was the last (the object has finished; ``ended`` is the header's word)."""

    html: Markup = NOTHING
    ended: str | None = None


Step = Callable[[], Awaitable[Update]]


def _message(name: str, html: str) -> bytes:
    # One data line per line of the HTML: the browser joins them with newlines again. A
    # carriage return would end a line of the stream too (and could start a field of the
    # data's choosing): in HTML it is the same written as a character reference.
    lines = "".join(f"data: {line}\n" for line in html.replace("\r", "&#13;").split("\n"))
    return f"event: {name}\n{lines}\n".encode()


def stream(request: Request, step: Step) -> StreamingResponse:
    """The live stream of one page: ``step`` looks at the store once per poll (the job pages:
    at the change feed, and at the store when it shows their jobs moved)."""
    feed: ChangeFeed = request.app.state.changes

    async def messages() -> AsyncIterator[bytes]:
        async with feed.following():
            async for message in _messages(request, step):
                yield message

    return streams.stream(messages())


async def _messages(request: Request, step: Step) -> AsyncIterator[bytes]:
    first = True
    async for keepalive in streams.ticks(request):
        try:
            update = await step()
        except StoreError:
            # Ending the stream makes the page say it is reconnecting, and reconnect.
            return
        html = update.html
        if first:
            html = fragment("parts.html", "live_state", text="live", on=True) + html
            first = False
        if update.ended is not None:
            html += fragment("parts.html", "live_state", text=update.ended)
            yield _message("update", str(html))
            yield _message("close", "")
            return
        if html:
            yield _message("update", str(html))
        elif keepalive:
            yield b": keepalive\n\n"
