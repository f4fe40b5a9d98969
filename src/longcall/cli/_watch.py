"""Following jobs as they change by polling the database: ``longcall jobs watch``.

Polling needs nothing but the database, so it works the same on SQLite and PostgreSQL, with or
without a server running. Each :meth:`look` returns what changed since the previous look (the
first look returns everything there is); the caller decides how often to look. The followers
only read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longcall.app import App
from longcall.core.jobs import Delivery, Job, JobEvent, JobState
from longcall.errors import JobNotFound

# Deliveries after which nothing more will reach the agent's session.
SETTLED = frozenset({Delivery.DELIVERED, Delivery.FAILED, Delivery.ORPHANED})


@dataclass(frozen=True, slots=True)
class Seen:
    """One thing a look noticed: a new entry of a job's log (``event``), or the job's row."""

    job: Job
    event: JobEvent | None = None


def done(job: Job, *, until: str = "delivered") -> bool:
    """Whether a watch of ``job`` is over: finished (``until="finished"``), or finished and
    its response delivered to the agent, or delivery given up (``until="delivered"``)."""
    if not job.terminal:
        return False
    return until == "finished" or job.delivery in SETTLED


class JobFollower:
    """One job: each new entry of its log, then its row whenever state or delivery changed."""

    def __init__(self, app: App, job_id: str) -> None:
        self.app = app
        self.job_id = job_id
        self.after = 0
        self._last: tuple[JobState, Delivery] | None = None

    def look(self) -> list[Seen]:
        """What is new; raises :class:`~longcall.errors.JobNotFound` for an unknown job."""
        # The log first: the row read after it is at least as new as the entries it shows.
        events = self.app.job_events(self.job_id, after=self.after)
        job = self.app.get_job(self.job_id)
        seen = [Seen(job, event) for event in events]
        if events:
            self.after = events[-1].seq
        if (job.state, job.delivery) != self._last:
            self._last = (job.state, job.delivery)
            seen.append(Seen(job))
        return seen


class JobsFollower:
    """The newest ``limit`` jobs matching the filters: each one whose row changed.

    A job that stops matching (it leaves ``state="started"`` by finishing) is shown once more
    with its new row, then no longer followed.
    """

    def __init__(self, app: App, *, limit: int = 50, **filters: Any) -> None:
        self.app = app
        self.limit = limit
        self.filters = filters
        self._updated: dict[str, float] = {}

    def look(self) -> list[Seen]:
        jobs = self.app.list_jobs(limit=self.limit, **self.filters)
        current = {job.job_id: job.updated_at for job in jobs}
        changed = [job for job in jobs if self._updated.get(job.job_id) != job.updated_at]
        for job_id in self._updated.keys() - current.keys():
            try:
                left = self.app.get_job(job_id)
            except JobNotFound:
                continue
            if left.updated_at != self._updated[job_id]:
                changed.append(left)
        self._updated = current
        changed.sort(key=lambda job: (job.updated_at, job.job_id))
        return [Seen(job) for job in changed]
