"""The ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.agents import AgentRunner
from longcall.app import App
from longcall.errors import LongcallError
from longcall.server import (
    cron,
    dashboard,
    events,
    hooks,
    jobs,
    metrics,
    runs,
    sessions,
    spec,
    workers,
)
from longcall.server.errors import error


@dataclass(frozen=True, slots=True)
class Settings:
    tolerance: float = 300.0  # seconds a signed delivery stays acceptable
    max_body: int = hooks.MAX_BODY
    poll: float = 0.5  # how often an event stream looks for changes made by other processes
    keepalive: float = 15.0  # seconds between comments on a quiet event stream
    login_ttl: float = 12 * 3600.0  # seconds a dashboard login lasts
    # The origin browsers reach the dashboard at when a proxy serves it under another name
    # (``https://longcall.example.com``); requests naming the server itself are accepted too.
    public_origin: str | None = None


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    app: App = request.app.state.longcall
    try:
        await app.in_thread(app.store.check_schema)
    except LongcallError as exc:
        return JSONResponse({"status": "unavailable", "reasons": [str(exc)]}, status_code=503)
    return JSONResponse({"status": "ready"})


async def not_found(request: Request, exc: Exception) -> Response:
    return error(404, "not_found", f"nothing at {request.url.path}")


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return error(405, "method_not_allowed", f"{request.method} is not served at {request.url.path}")


def create_app(
    app: App, *, agent: AgentRunner | None = None, settings: Settings | None = None
) -> Starlette:
    """The HTTP service over ``app``'s store; ``agent`` (if given) shows session transcripts."""

    @contextlib.asynccontextmanager
    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        web.state.closing.clear()
        try:
            yield
        finally:
            web.state.closing.set()

    measured = metrics.Metrics(app)

    web = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/v1/hooks/{source}", measured.counted(hooks.receive), methods=["POST"]),
            *events.ROUTES,
            *jobs.ROUTES,
            *runs.ROUTES,
            *workers.ROUTES,
            *cron.ROUTES,
            *sessions.ROUTES,
            *metrics.ROUTES,
            *spec.ROUTES,
            *dashboard.ROUTES,
        ],
        lifespan=lifespan,
        # Even the router's own refusals answer in the API's error shape.
        exception_handlers={404: not_found, 405: method_not_allowed},
    )
    web.state.longcall = app
    web.state.agent = agent
    web.state.settings = settings or Settings()
    web.state.closing = asyncio.Event()
    web.state.metrics = measured
    return web
