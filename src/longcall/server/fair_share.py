"""One caller cannot take every worker thread and store connection: a per-token write limit,
and the headers every answer carries.

:class:`WriteShare` lets each credential (a bearer token, or the dashboard's cookie) have at
most ``per_token`` writes (POST, PUT, PATCH, DELETE) in progress at once; one more is
answered ``429`` with ``Retry-After`` at once, before its body is read. Reads, health checks
and signed webhooks (which carry no token; their senders retry on their own schedule) are not
counted. The count is kept before authentication, by a digest of the credential, so even a
flood of writes with a made-up token waits its turn behind its own limit, not others'.
"""

from __future__ import annotations

import hashlib

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from longcall.server.errors import error_body

DEFAULT_WRITES_PER_TOKEN = 4
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RETRY_AFTER = "1"  # seconds: writes finish in milliseconds unless the store is in trouble

_429 = error_body(
    "too_many_writes", "this token already has the most writes in progress it may have"
)


def credential(scope: Scope) -> bytes | None:
    """A digest of the request's bearer token or login cookie, or None without either."""
    headers = Headers(scope=scope)
    secret = headers.get("authorization") or headers.get("cookie")
    if not secret:
        return None
    return hashlib.blake2b(secret.encode("latin-1"), digest_size=16).digest()


class WriteShare:
    """ASGI middleware: at most ``per_token`` writes in progress for each credential."""

    def __init__(self, app: ASGIApp, *, per_token: int = DEFAULT_WRITES_PER_TOKEN) -> None:
        if per_token < 1:
            raise ValueError("writes per token must be at least 1")
        self.app = app
        self.per_token = per_token
        self.in_progress: dict[bytes, int] = {}  # one event loop: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES:
            await self.app(scope, receive, send)
            return
        key = credential(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        if self.in_progress.get(key, 0) >= self.per_token:
            await _too_many(send)
            return
        self.in_progress[key] = self.in_progress.get(key, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.in_progress[key] - 1
            if left:
                self.in_progress[key] = left
            else:
                del self.in_progress[key]


async def _too_many(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_429)).encode()),
                (b"retry-after", RETRY_AFTER.encode()),
                *SAFE_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": _429})


SAFE_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store")]
"""On every answer: no content sniffing (a JSON error echoing input never runs as a page), and
nothing kept by caches (answers hold users' jobs and results)."""


class SafeHeaders:
    """ASGI middleware adding :data:`SAFE_HEADERS` to answers that do not set them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SAFE_HEADERS if n not in present]
                if extra:
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, sending)
