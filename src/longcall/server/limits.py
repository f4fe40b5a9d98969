"""Slow clients are cut off: a request's head and its body each have a deadline.

uvicorn bounds neither: a connection that sends half a request line and then a byte a minute
is held for as long as the client likes, and a few thousand such connections hold the server.
:func:`protocol` returns uvicorn's h11 protocol with two timers added:

- the *header* timer starts when a connection is made, and again when the first byte of a
  keep-alive connection's next request arrives; it stops when the request's head is complete.
  On expiry the connection is closed without an answer (there is no request to answer).
- the *body* timer starts when the head is complete and stops when the whole body is in. On
  expiry a request not yet answered gets ``408`` and the connection is closed; one already
  answered (an early 413, say, while the client keeps sending) is just closed.

Both deadlines are fixed from the start, not renewed by each byte that arrives, so trickling
does not help. Idle keep-alive connections stay uvicorn's business (``timeout_keep_alive``).

uvicorn's ``limit_concurrency`` is left off on purpose: it counts open connections, slow ones
included, so it would turn a slow-client attack into 503s for everyone else; the timers here
free those connections instead.
"""

from __future__ import annotations

import asyncio
import json

import h11
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's line and headers."""
BODY_TIMEOUT = 30.0
"""Seconds a client has to send a request's body, counted from the end of its headers."""

_408_BODY = json.dumps(
    {
        "error": {
            "code": "request_timeout",
            "message": "the request body did not arrive in time",
            "field": None,
        }
    }
).encode()


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines for a request's head and for its body.

    Use :func:`protocol` to get a subclass with the deadlines set.
    """

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT

    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self.conn.their_state is h11.IDLE:
            # The first bytes of the next request on a keep-alive connection.
            self._header_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is not h11.SEND_BODY and self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if state is h11.IDLE:
            # The next request may have begun in data already read (pipelined, or sent right
            # after a body the app answered without reading): its head is on the clock too.
            if self._header_timer is None and self.conn.trailing_data[0]:
                self._header_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)
            return
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if state is h11.SEND_BODY and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_too_slow)

    def _stop_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _head_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if (
            cycle is not None
            and not cycle.response_started
            and self.conn.our_state is h11.SEND_RESPONSE
        ):
            # The app sees a disconnect and its own answer, if any, goes nowhere.
            cycle.disconnected = True
            cycle.message_event.set()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_408_BODY)).encode()),
                (b"connection", b"close"),
            ]
            try:
                out = self.conn.send(h11.Response(status_code=408, headers=headers))
                out = (out or b"") + (self.conn.send(h11.Data(data=_408_BODY)) or b"")
                out += self.conn.send(h11.EndOfMessage()) or b""
                self.transport.write(out)
            except h11.LocalProtocolError:  # pragma: no cover - h11 refused; just close
                pass
        self.transport.close()


def protocol(
    *, header_timeout: float = HEADER_TIMEOUT, body_timeout: float = BODY_TIMEOUT
) -> type[TimedH11Protocol]:
    """The protocol class to pass as ``uvicorn.Config(http=...)``, with these deadlines."""
    if header_timeout <= 0 or body_timeout <= 0:
        raise ValueError("the header and body timeouts must be positive")
    return type(
        "TimedH11Protocol",
        (TimedH11Protocol,),
        {"header_timeout": float(header_timeout), "body_timeout": float(body_timeout)},
    )


class QuietDisconnects:
    """ASGI middleware: a client gone before its body arrived is no server error.

    Starlette raises :class:`~starlette.requests.ClientDisconnect` from the body read, and
    uvicorn would log it with a traceback as an error; every timed-out slow client would.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            return
