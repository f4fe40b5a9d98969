"""The ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from longcall.agents import AgentRunner
from longcall.app import App
from longcall.errors import InvalidValue
from longcall.server import api, checks, metrics
from longcall.server.api.requests import MAX_BODY
from longcall.server.change_feed import ChangeFeed
from longcall.server.dashboard.routes import ROUTES as DASHBOARD_ROUTES
from longcall.server.errors import error
from longcall.server.fair_share import DEFAULT_WRITES_PER_TOKEN, SafeHeaders, WriteShare
from longcall.server.mcp_mount import mcp_route


@dataclass(frozen=True, slots=True)
class Settings:
    tolerance: float = 300.0  # seconds a signed delivery stays acceptable
    max_body: int = MAX_BODY
    poll: float = 0.5  # how often an event stream looks for changes made by other processes
    keepalive: float = 15.0  # seconds between comments on a quiet event stream
    writes_per_token: int = DEFAULT_WRITES_PER_TOKEN  # writes in progress at once, per token
    login_ttl: float = 12 * 3600.0  # seconds a dashboard login lasts
    # The origin browsers reach the dashboard at when a proxy serves it under another name
    # (``https://longcall.example.com``); requests naming the server itself are accepted too.
    public_origin: str | None = None


async def not_found(request: Request, exc: Exception) -> Response:
    return error(404, "not_found", f"nothing at {request.url.path}")


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    """405, with ``Allow`` listing the methods of every route at this path (several routes
    may share one, each with its methods)."""
    allowed: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "\x00"})
        if match is not Match.NONE and isinstance(route, Route) and route.methods:
            allowed |= route.methods
    response = error(
        405, "method_not_allowed", f"{request.method} is not served at {request.url.path}"
    )
    response.headers["allow"] = ", ".join(sorted(allowed))
    return response


async def invalid_value(request: Request, exc: Exception) -> Response:
    """A value the store refused before (or instead of) writing it: the caller's to fix."""
    assert isinstance(exc, InvalidValue)
    if exc.nul:
        return error(400, "bad_request", str(exc), exc.field)
    return error(422, "invalid_value", str(exc), exc.field)


def create_app(
    app: App, *, agent: AgentRunner | None = None, settings: Settings | None = None
) -> Starlette:
    """The HTTP service over ``app``'s store; ``agent`` (if given) shows session transcripts."""

    mcp = mcp_route(app)

    @contextlib.asynccontextmanager
    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        web.state.closing.clear()
        app.allow_retries()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if mcp is not None:
                    await stack.enter_async_context(mcp[1].running())
                yield
        finally:
            web.state.closing.set()

    measured = metrics.Metrics(app)

    web = Starlette(
        routes=[*api.routes(measured.counted), *DASHBOARD_ROUTES],
        lifespan=lifespan,
        # Even the router's own refusals answer in the API's error shape.
        exception_handlers={
            404: not_found,
            405: method_not_allowed,
            InvalidValue: invalid_value,
        },
        middleware=[
            Middleware(SafeHeaders),
            Middleware(WriteShare, per_token=(settings or Settings()).writes_per_token),
        ],
    )
    checks.guard(web.router.routes)
    if mcp is not None:
        # After the guard: the MCP transport checks its own JSON-RPC bodies, not our id rules.
        web.router.routes.append(mcp[0])
    web.state.longcall = app
    web.state.agent = agent
    web.state.settings = settings or Settings()
    web.state.closing = asyncio.Event()
    web.state.changes = ChangeFeed(app, poll=web.state.settings.poll, closing=web.state.closing)
    web.state.metrics = measured
    return web
