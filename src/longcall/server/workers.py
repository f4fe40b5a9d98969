"""``/v1/workers``: the workers alive and the workflows each can run.

A worker beats as it sweeps (:mod:`longcall.worker`); one whose last beat has expired is not
listed. The dashboard asks this to tell a queued run that no live worker can take from one
waiting its turn. Any token may ask: it names workers and workflows, no user's data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.app import App
from longcall.core.workers import WorkerInfo
from longcall.server.auth import Principal
from longcall.server.jobs import authorized
from longcall.shapes import iso


def worker_json(worker: WorkerInfo) -> dict[str, Any]:
    return {
        "workerId": worker.worker_id,
        "workflows": list(worker.workflows),
        "startedAt": iso(worker.started_at),
        "heartbeatAt": iso(worker.heartbeat_at),
        "expiresAt": iso(worker.expires_at),
    }


def runnable(workers: Iterable[WorkerInfo]) -> set[str]:
    """The workflows at least one of ``workers`` can run."""
    return {name for worker in workers for name in worker.workflows}


async def list_workers(request: Request, app: App, who: Principal) -> Response:
    workers = await app.in_thread(app.store.live_workers)
    return JSONResponse({"workers": [worker_json(w) for w in workers]})


ROUTES = [Route("/v1/workers", authorized(list_workers), methods=["GET"])]
