"""Slow clients are cut off: a request's head and its body each have a deadline.

uvicorn bounds neither: a connection that sends half a request line and then a byte a minute
is held for as long as the client likes, and a few thousand such connections hold the server.
:func:`protocol` returns one of uvicorn's HTTP protocols (httptools by default, or h11) with
two timers added:

- the *header* timer starts when a connection is made, and again when the first byte of a
  keep-alive connection's next request arrives; it stops when the request's head is complete.
  On expiry the connection is closed without an answer (there is no request to answer).
- the *body* timer starts when the head is complete and stops when the whole body is in. On
  expiry a request not yet answered gets ``408`` and the connection is closed; one already
  answered (an early 413, say, while the client keeps sending) is just closed.

Both deadlines are fixed from the start, not renewed by each byte that arrives, so trickling
does not help. Idle keep-alive connections stay uvicorn's business (``timeout_keep_alive``).
The timers live in :class:`Deadlines`; each protocol class only says which part of a request
it is reading once it has parsed what arrived, and which request may still be answered ``408``.

uvicorn's ``limit_concurrency`` is left off on purpose: it counts open connections, slow ones
included, so it would turn a slow-client attack into 503s for everyone else; the timers here
free those connections instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Literal, Protocol

import h11
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from longcall.server.errors import error_body

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's line and headers."""
BODY_TIMEOUT = 30.0
"""Seconds a client has to send a request's body, counted from the end of its headers."""

HTTP = Literal["httptools", "h11"]
"""The uvicorn HTTP implementations :func:`protocol` can time."""

_408_BODY = error_body("request_timeout", "the request body did not arrive in time")
_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_408_BODY), _408_BODY)
)


class _Cycle(Protocol):
    """What the timers touch of a uvicorn request-response cycle (both protocols have one)."""

    disconnected: bool
    message_event: asyncio.Event


Reading = Literal["head", "body"] | None
"""The part of a request a connection is reading: its head, its body, or none (between)."""


class Deadlines(asyncio.Protocol):
    """The header and body timers, mixed into a uvicorn protocol class ahead of it.

    The protocol class calls :meth:`_clock` whenever it has parsed what arrived, with the part
    of a request it is in the middle of, and says through :meth:`_unanswered` which request a
    late body may still be answered for.
    """

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        self._clock("head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._clock(None)
        super().connection_lost(exc)

    def _clock(self, reading: Reading) -> None:
        """Time the part being read, and nothing else; a timer already running keeps going.

        A request that arrives whole between two calls starts no timer at all.
        """
        if reading != "head" and self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if reading != "body" and self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if reading == "head" and self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)
        elif reading == "body" and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_too_slow)

    def _unanswered(self) -> _Cycle | None:
        """The request whose body is late, if nothing has been answered for it yet."""
        raise NotImplementedError

    def _head_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        cycle = self._unanswered()
        if cycle is not None:
            # The app sees a disconnect and its own answer, if any, goes nowhere.
            cycle.disconnected = True
            cycle.message_event.set()
            self.transport.write(_408)
        self.transport.close()


class TimedHttpToolsProtocol(Deadlines, HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines for a request's head and for its body.

    Use :func:`protocol` to get a subclass with the deadlines set.
    """

    _reading: Reading = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._clock(self._reading)

    # httptools calls these while it parses; a request's first byte begins its message,
    # whether it comes alone, after an idle keep-alive, or right behind the previous body.
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = "head"

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._reading = "body"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading = None

    def _unanswered(self) -> _Cycle | None:
        # A pipelined request waits behind one still being answered: no 408 in between.
        if self.pipeline or self.cycle is None or self.cycle.response_started:
            return None
        return self.cycle


class TimedH11Protocol(Deadlines, H11Protocol):
    """uvicorn's h11 protocol with deadlines for a request's head and for its body.

    Use :func:`protocol` to get a subclass with the deadlines set.
    """

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._clock("body")
        elif state is h11.IDLE and self.conn.trailing_data[0]:
            # The next request has begun in data already read (on a keep-alive connection,
            # pipelined, or sent right after a body the app answered without reading).
            self._clock("head")
        else:
            self._clock(None)

    def _unanswered(self) -> _Cycle | None:
        cycle = self.cycle
        if cycle is None or cycle.response_started or self.conn.our_state is not h11.SEND_RESPONSE:
            return None
        return cycle


def _no_delay(transport: asyncio.Transport) -> None:
    """Send each answer at once. asyncio only turns Nagle's algorithm off for sockets made
    with ``IPPROTO_TCP``; a listening socket made as ``socket.socket()`` (proto 0) and handed
    to the server would otherwise leave every answer split in two writes waiting ~40 ms for
    the client's delayed ACK."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def protocol(
    *,
    http: HTTP = "httptools",
    header_timeout: float = HEADER_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
) -> type[TimedHttpToolsProtocol] | type[TimedH11Protocol]:
    """The protocol class to pass as ``uvicorn.Config(http=...)``, with these deadlines."""
    if header_timeout <= 0 or body_timeout <= 0:
        raise ValueError("the header and body timeouts must be positive")
    base = {"httptools": TimedHttpToolsProtocol, "h11": TimedH11Protocol}[http]
    return type(
        base.__name__,
        (base,),
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
