"""The ASGI application."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.app import App
from longcall.errors import LongcallError
from longcall.server import hooks, jobs


@dataclass(frozen=True, slots=True)
class Settings:
    tolerance: float = 300.0  # seconds a signed delivery stays acceptable
    max_body: int = hooks.MAX_BODY


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    app: App = request.app.state.longcall
    try:
        await app.in_thread(app.store.check_schema)
    except LongcallError as exc:
        return JSONResponse({"status": "unavailable", "reasons": [str(exc)]}, status_code=503)
    return JSONResponse({"status": "ready"})


def create_app(app: App, *, settings: Settings | None = None) -> Starlette:
    """The HTTP service over ``app``'s store."""
    web = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/v1/hooks/{source}", hooks.receive, methods=["POST"]),
            *jobs.ROUTES,
        ]
    )
    web.state.longcall = app
    web.state.settings = settings or Settings()
    return web
