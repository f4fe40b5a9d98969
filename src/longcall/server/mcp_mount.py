"""``/mcp``: the App's long-running tools as durable MCP Tasks, over streamable HTTP.

Mounted by :func:`longcall.server.app.create_app` only when the ``mcp`` extra is
installed. Every request needs an API bearer token, as ``/v1`` does (the dashboard's
login cookie is not accepted here: an MCP client is not a browser page); a task is created
in the token's user's namespace and only that user, or an admin token, can poll or cancel
it. The transport runs stateless with JSON answers, so any server process on the store
answers any request, and no session lives in one process's memory.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from longcall.app import App
from longcall.server.auth import authenticate
from longcall.server.errors import error

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"


def available() -> bool:
    """Whether the ``mcp`` extra is installed."""
    return importlib.util.find_spec("mcp") is not None


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: authenticate, then hand over to the SDK's transport."""

    def __init__(self, app: App) -> None:
        from longcall.mcp import mcp_server

        self.server = mcp_server(app)
        self.manager: StreamableHTTPSessionManager | None = None  # while the lifespan runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from longcall.mcp import CALLER_SCOPE_KEY, Caller

        request = Request(scope, receive)
        if not request.headers.get("authorization"):
            answer = error(401, "unauthorized", "send an Authorization: Bearer <token> header")
            answer.headers["www-authenticate"] = "Bearer"
            await answer(scope, receive, send)
            return
        principal = await authenticate(request)
        if isinstance(principal, Response):
            await principal(scope, receive, send)
            return
        if self.manager is None:
            answer = error(503, "mcp_not_running", "the MCP endpoint is not running")
            await answer(scope, receive, send)
            return
        scope[CALLER_SCOPE_KEY] = Caller(principal.user_id, principal.admin)
        await self.manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's transport for one run of the server's lifespan (a manager runs once, and
        an app's lifespan may run again, as test clients do)."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True)
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None


def mcp_route(app: App) -> tuple[Route, McpEndpoint] | None:
    """The ``/mcp`` route and its endpoint (whose :meth:`McpEndpoint.running` the server's
    lifespan enters), or None without the ``mcp`` extra."""
    if not available():
        return None
    endpoint = McpEndpoint(app)
    return Route(PATH, endpoint, methods=["GET", "POST", "DELETE"]), endpoint
