"""``/healthz``, ``/readyz`` and ``/metrics``: for load balancers and monitoring, without a
token (they say whether and how many, never what)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.server import metrics
from longcall.server.api.models import NotReady, Ready, Up
from longcall.server.api.operation import Answer, Operation
from longcall.server.api.requests import reply


async def healthz(request: Request) -> Response:
    return reply(Up())


async def readyz(request: Request) -> Response:
    """Ready when the schema is current and the store is not failing: requests waiting in
    the store's retries (a database away, a disk full) make this 503 with the reason."""
    app: App = request.app.state.longcall
    reasons = await app.in_thread(app.monitor.problems)
    if reasons:
        return reply(NotReady(reasons=reasons), status_code=503)
    return reply(Ready())


OPERATIONS = (
    Operation(
        "GET",
        "/healthz",
        healthz,
        tag="health",
        summary="The process is up.",
        answers={200: Answer("Up.", Up)},
        auth=False,
    ),
    Operation(
        "GET",
        "/readyz",
        readyz,
        tag="health",
        summary="The store answers and its schema is current.",
        answers={200: Answer("Ready.", Ready), 503: Answer("Not ready: the reasons.", NotReady)},
        auth=False,
    ),
    Operation(
        "GET",
        "/metrics",
        metrics.metrics,
        tag="health",
        summary="Prometheus metrics: jobs by state, deliveries, webhook outcomes.",
        answers={200: Answer("Prometheus text.", media="text/plain")},
        refusals=(503,),
        auth=False,
    ),
)
