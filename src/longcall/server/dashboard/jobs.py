"""The dashboard's jobs list at ``/``, searched in the store and filtered by state, and its
live stream at ``/live/jobs``: the same query again whenever a job changes, the rows sent when
they differ. A job outside the filter or the search is never sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import JobState
from longcall.server.api.jobs import search_problem, visible_job
from longcall.server.auth import Principal
from longcall.server.change_feed import LOOKBACK, ChangeFeed
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
from longcall.store import SEARCH_WINDOW

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

    def nothing_found(self, after: str | None = None) -> str:
        """What an empty list says (``after``: the search goes on among older jobs)."""
        which = f"{self.state} jobs" if self.state else "jobs"
        if self.search and after is not None:
            return (
                f"No {which} match “{self.search}” among the {SEARCH_WINDOW:,} searched here;"
                " “Older jobs” searches on."
            )
        if self.search:
            return f"No {which} match “{self.search}”."
        return f"No {which} here yet; new ones appear as they start."

    async def jobs(self, app: App, who: Principal) -> tuple[list[dict[str, Any]], str | None]:
        """The page's jobs, and the id of the job the next (older) page starts after."""
        before = None
        if self.before:
            older = await visible_job(app, who, self.before)
            before = (older.created_at, older.job_id)
        found = await app.in_thread(
            app.monitor.job_page,
            state=JobState(self.state) if self.state else None,
            user_id=None if who.admin else who.user_id,
            text=self.search or None,
            before=before,
            limit=PAGE_SIZE,
        )
        return [job_json(j) for j in found.jobs], found.next[1] if found.next else None

    def older_page(self, after: str | None) -> dict[str, str | None] | None:
        """The query of the next page of older jobs, when there may be one."""
        if after is None:
            return None
        return {"state": self.state or "", "q": self.search, "before": after}


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
    jobs, after = await view.jobs(app, who)
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
        empty=view.nothing_found(after),
        more=view.older_page(after),
    )


async def jobs_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/jobs``: the list's rows again whenever the jobs it shows change."""
    view = _view(request)
    message = view.problem()
    if message is not None:
        return error(400, "invalid_query", message)
    sent: dict[str, str] | None = None  # job id -> the version shown, in the list's order
    feed: ChangeFeed = request.app.state.changes
    considered: dict[str, float] = {}  # job id -> its version that made the list be asked

    async def step() -> Update:
        nonlocal sent
        # The list is asked again only when the feed shows a job this caller may see at a
        # version not considered yet: with nothing changing, an open page costs no query.
        feed.check()
        moved = False
        for job in feed.changed_since(feed.newest - 2 * LOOKBACK):
            if (who.admin or job.user_id == who.user_id) and considered.get(
                job.job_id
            ) != job.updated_at:
                considered[job.job_id] = job.updated_at
                moved = True
        for job_id in [k for k, at in considered.items() if at < feed.newest - 2 * LOOKBACK]:
            del considered[job_id]
        if sent is not None and not moved:
            return Update()
        jobs, after = await view.jobs(app, who)
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
            empty=view.nothing_found(after),
            more=view.older_page(after),
            changed=changed,
        )
        return Update(html)

    return stream(request, step)
