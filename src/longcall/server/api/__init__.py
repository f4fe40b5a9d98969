"""The HTTP API: ``/v1/...`` and the health checks, one module per concept.

Each module declares its routes as :class:`~.operation.Operation` values; :func:`routes`
turns them into the app's routes and ``/openapi.json`` into the document describing them,
so what is served and what is documented come from one place. ``/docs`` shows the document.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.routing import BaseRoute

from longcall.server.api import (
    cron,
    docs,
    events,
    health,
    hooks,
    jobs,
    queues,
    run_messages,
    run_streams,
    runs,
    sessions,
    spec,
    workers,
)
from longcall.server.api.operation import Endpoint, Operation

OPERATIONS: tuple[Operation, ...] = (
    *health.OPERATIONS,
    hooks.RECEIVE,
    # Before jobs: /v1/jobs/{jobId}/events would otherwise be read as a job id ending "/events".
    *events.OPERATIONS,
    *jobs.OPERATIONS,
    *run_messages.OPERATIONS,
    *run_streams.OPERATIONS,
    *runs.OPERATIONS,
    *workers.OPERATIONS,
    *queues.OPERATIONS,
    *cron.OPERATIONS,
    *sessions.OPERATIONS,
)
"""Every operation, in the order the routes are matched."""


def routes(count_webhooks: Callable[[Endpoint], Endpoint]) -> list[BaseRoute]:
    """The API's routes, ``/openapi.json`` and ``/docs``; ``count_webhooks`` wraps the
    webhook endpoint (the app's metrics count its answers)."""
    served: list[BaseRoute] = [
        op.route(count_webhooks if op is hooks.RECEIVE else None) for op in OPERATIONS
    ]
    return [*served, spec.route(OPERATIONS), *docs.routes(OPERATIONS)]
