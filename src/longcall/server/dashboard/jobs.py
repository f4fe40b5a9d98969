"""The dashboard's jobs list at ``/``, searched in the store and filtered by state, and its
live stream at ``/live/jobs``: the same query again whenever a job changes, the rows sent when
they differ. A job outside the filter or the search is never sent."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import JobState
from longcall.server.api.events import LOOKBACK
from longcall.server.api.jobs import search_problem, visible_job
from longcall.server.auth import Principal
from longcall.server.dashboard._live import Update, stream
from longcall.server.dashboard._render import (
    PAGE_SIZE,
    filter_links,
    fragment,
    page,
    query,
)
from longcall.server.errors import error
from longcall.shapes import job_json

STATES = [s.value for s in JobState]


@dataclass(frozen=True, slots=True)
class _View:
    """Which jobs a list shows: a state, a search, and where an older page starts."""

    state: str | None
    search: str
    before: str | None

    def problem(self) -> str | None:
        """Why the list cannot be shown, or None."""
        if self.state is not None and self.state not in STATES:
            return f"There is no job state “{self.state}”. The states are: {', '.join(STATES)}."
        problem = search_problem(self.search)
        return None if problem is None else f"That search cannot be made: {problem}."

    def nothing_found(self) -> str:
        """What an empty list says."""
        which = f"{self.state} jobs" if self.state else "jobs"
        if self.search:
            return f"No {which} match “{self.search}”."
        return f"No {which} here yet; new ones appear as they start."

    async def jobs(self, app: App, who: Principal) -> list[dict[str, Any]]:
        before = None
        if self.before:
            older = await visible_job(app, who, self.before)
            before = (older.created_at, older.job_id)
        found = await app.list_jobs_async(
            state=JobState(self.state) if self.state else None,
            user_id=None if who.admin else who.user_id,
            text=self.search or None,
            before=before,
            limit=PAGE_SIZE,
        )
        return [job_json(j) for j in found]

    def older_page(self, jobs: list[dict[str, Any]]) -> dict[str, str | None] | None:
        """The query of the next page of older jobs, when there may be one."""
        if len(jobs) < PAGE_SIZE:
            return None
        return {"state": self.state or "", "q": self.search, "before": jobs[-1]["jobId"]}


def _view(request: Request) -> _View:
    q = request.query_params
    return _View(q.get("state") or None, q.get("q", "").strip(), q.get("before") or None)


async def jobs_page(request: Request, app: App, who: Principal) -> Response:
    view = _view(request)
    message = view.problem()
    if message is not None:
        bad_state = view.state is not None and view.state not in STATES
        links = filter_links("/", "state", STATES, None) if bad_state else None
        return page(
            "refused.html", "Jobs", who, status=400, message=message, links=links, state=view.state
        )
    jobs = await view.jobs(app, who)
    params = {"state": view.state, "q": view.search, "before": view.before}
    return page(
        "jobs_page.html",
        "Jobs",
        who,
        live="connecting…",
        live_url=f"/live/jobs?{query(params)}",
        state_links=filter_links("/", "state", STATES, view.state, kept={"q": view.search}),
        state=view.state,
        search=view.search,
        jobs=jobs,
        empty=view.nothing_found(),
        more=view.older_page(jobs),
    )


async def jobs_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/jobs``: the list's rows again whenever the jobs it shows change."""
    view = _view(request)
    message = view.problem()
    if message is not None:
        return error(400, "invalid_query", message)
    sent: dict[str, str] | None = None  # job id -> the version shown, in the list's order
    newest: float | None = None
    changed_at = 0.0

    async def step() -> Update:
        nonlocal sent, newest, changed_at
        latest = await app.in_thread(app.monitor.last_change)
        # A change can commit up to LOOKBACK seconds after the time it was stamped with, so
        # the list is asked again for that long after the newest change moved.
        if latest != newest:
            newest, changed_at = latest, time.monotonic()
        elif sent is not None and time.monotonic() - changed_at > LOOKBACK:
            return Update()
        jobs = await view.jobs(app, who)
        versions = {j["jobId"]: j["updatedAt"] for j in jobs}
        before = sent
        if before is not None and list(versions.items()) == list(before.items()):
            return Update()
        sent = versions
        # Marked as changed: the rows that came in or moved since the last update.
        changed = (
            set() if before is None else {i for i, at in versions.items() if before.get(i) != at}
        )
        html = fragment(
            "jobs.html",
            "update",
            jobs=jobs,
            empty=view.nothing_found(),
            more=view.older_page(jobs),
            changed=changed,
        )
        return Update(html)

    return stream(request, step)
