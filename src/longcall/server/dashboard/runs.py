"""The dashboard's workflow runs list at ``/runs``, filtered by status, and its live stream at
``/live/runs``: the same query every two seconds, the rows sent when they differ. A queued run
whose workflow no live worker has registered says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.runs import RunStatus
from longcall.server.api import runs as run_api
from longcall.server.api.queues import queue_info
from longcall.server.api.workers import runnable
from longcall.server.auth import Principal
from longcall.server.dashboard._live import Update, stream
from longcall.server.dashboard._poll import Throttle
from longcall.server.dashboard._render import PAGE_SIZE, filter_links, fragment, page, query
from longcall.server.errors import error
from longcall.shapes import run_json


def stranded(status: str, workflow_id: str, able: set[str]) -> bool:
    """Whether a run in ``status`` waits for a worker that no live one is (``able``: the
    workflows the live workers can run)."""
    return status == RunStatus.QUEUED.value and workflow_id not in able


async def live_workflows(app: App) -> set[str]:
    """The workflows some live worker can run, from the workers' heartbeats."""
    return runnable(await app.in_thread(app.monitor.workers))


@dataclass(frozen=True, slots=True)
class _View:
    """Which runs a list shows: a status, and where an older page starts."""

    status: str | None
    before: str | None

    def problem(self) -> str | None:
        if self.status is not None and self.status not in run_api.STATUSES:
            statuses = ", ".join(run_api.STATUSES)
            return f"There is no run status “{self.status}”. The statuses are: {statuses}."
        return None

    async def runs(self, app: App, who: Principal) -> list[tuple[dict[str, Any], bool]]:
        """The runs, each with whether no live worker can run it."""
        before = None
        if self.before:
            older = await run_api.visible_run(app, who, self.before)
            before = (older.created_at, older.run_id)
        found = await app.in_thread(
            app.list_runs,
            status=RunStatus(self.status) if self.status else None,
            user_id=None if who.admin else who.user_id,
            before=before,
            limit=PAGE_SIZE,
        )
        able = await live_workflows(app)
        return [(run_json(r), stranded(r.status.value, r.workflow_id, able)) for r in found]


def _view(request: Request) -> _View:
    q = request.query_params
    return _View(q.get("status") or None, q.get("before") or None)


async def runs_page(request: Request, app: App, who: Principal) -> Response:
    view = _view(request)
    message = view.problem()
    links = filter_links("/runs", "status", run_api.STATUSES, None)
    if message is not None:
        return page("refused.html", "Runs", who, status=400, message=message, links=links)
    runs = await view.runs(app, who)
    # Queue depths are counts of every user's runs, with no run named: any login sees them.
    queues = [queue_info(s).dumped() for s in await app.in_thread(app.queue_stats)]
    more = None
    if len(runs) == PAGE_SIZE:
        more = {"status": view.status or "", "before": runs[-1][0]["runId"]}
    return page(
        "runs_page.html",
        "Runs",
        who,
        live="connecting…",
        live_url=f"/live/runs?{query({'status': view.status, 'before': view.before})}",
        status_links=filter_links("/runs", "status", run_api.STATUSES, view.status),
        runs=runs,
        more=more,
        queues=queues,
    )


async def runs_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/runs``: the list's rows again whenever they change."""
    view = _view(request)
    message = view.problem()
    if message is not None:
        return error(400, "invalid_query", message)
    throttle = Throttle()
    sent: list[tuple[str, str, bool]] | None = None  # what each row showed, in order

    async def step() -> Update:
        nonlocal sent
        if not throttle.due():
            return Update()
        runs = await view.runs(app, who)
        versions = [(r["runId"], r["updatedAt"], alone) for r, alone in runs]
        if versions == sent:
            return Update()
        shown = set(sent or [])
        changed = {v[0] for v in versions if sent is not None and v not in shown}
        sent = versions
        return Update(fragment("runs.html", "update", runs=runs, changed=changed))

    return stream(request, step)
