"""What the dashboard, the metrics and the health checks read: job counts and changes, live
workers, the runs doing a job, a run's parts, and whether the database is in trouble.

``app.monitor`` reads, one statement (or a check) on the store each, but for the job counts,
which fold the changes counted lately first.
"""

from __future__ import annotations

from typing import Any

from longcall.core.jobs import Delivery, Job, JobPage, JobState
from longcall.core.runs import Interrupt, Run, RunBacklog, Step
from longcall.core.workers import WorkerInfo
from longcall.errors import LongcallError
from longcall.runtime import Runtime


class Monitor:
    """Read-only views of the app's database for operators and their tools."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    # -- jobs --------------------------------------------------------------------------

    def job_counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (state, delivery), as kept while jobs change: a few rows to read, however
        many jobs there are. The changes counted since the worker's sweeper last folded them
        are folded first, so a server without a worker in its process reads a few rows too."""
        store = self._runtime.store
        store.fold_counts()
        return store.counts()

    def job_page(
        self,
        *,
        state: JobState | None = None,
        tool_name: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        delivery: Delivery | None = None,
        text: str | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> JobPage:
        """A page of jobs, newest first, and where the next page starts: what a listing shows.

        Unlike ``app.list_jobs``, a search (``text``) reads a bounded window of jobs per page
        (:data:`~longcall.store.SEARCH_WINDOW`), so its cost does not grow with the table; a
        page may then hold fewer than ``limit`` jobs and still have a next one.
        """
        return self._runtime.store.page_jobs(
            state=state,
            tool_name=tool_name,
            session_id=session_id,
            user_id=user_id,
            delivery=delivery,
            text=text,
            before=before,
            limit=limit,
        )

    def changed_jobs(
        self,
        since: float,
        after_id: str = "",
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        tool_name: str | None = None,
        limit: int = 200,
    ) -> list[Job]:
        """Jobs whose last change is after (``since``, ``after_id``), oldest change first."""
        return self._runtime.store.changed_jobs(
            since,
            after_id,
            user_id=user_id,
            session_id=session_id,
            tool_name=tool_name,
            limit=limit,
        )

    def last_change(self) -> float | None:
        """When the most recently changed job changed (None with no jobs)."""
        return self._runtime.store.last_change()

    # -- runs --------------------------------------------------------------------------

    def run_backlog(self) -> RunBacklog:
        """The runs not finished, by status, and when the oldest queued one became
        claimable: what a queue's depth and wait are read from."""
        return self._runtime.store.run_backlog()

    def run(self, run_id: str) -> Run:
        """The run as stored now, without its parts (``app.get_run`` has them all)."""
        return self._runtime.store.get_run(run_id)

    def run_value(self, run_id: str, key: str) -> tuple[bool, Any]:
        """(True, value) when the run has published ``key`` with ``ctx.set_event``; (False,
        None) when not yet."""
        return self._runtime.store.run_value(run_id, key)

    def run_steps(self, run_id: str) -> list[Step]:
        return self._runtime.store.run_steps(run_id)

    def child_runs(self, run_id: str) -> list[Run]:
        """The runs ``run_id`` started with ``ctx.start_child``, oldest first."""
        return self._runtime.store.child_runs(run_id)

    def run_interrupts(self, run_id: str) -> dict[str, Interrupt]:
        """The run's questions by key, answered or not."""
        return self._runtime.store.run_interrupts(run_id)

    def runs_of_job(self, job_id: str) -> list[Run]:
        """The background runs doing the work of the job ``job_id``, oldest first."""
        return self._runtime.store.runs_of_job(job_id)

    # -- the service -------------------------------------------------------------------

    def workers(self) -> list[WorkerInfo]:
        """The workers alive now (their heartbeat has not run out)."""
        return self._runtime.store.live_workers()

    def problems(self) -> list[str]:
        """Why the app cannot serve now, if it cannot: requests waiting in the store's
        retries (a database away, a disk full), a schema that is not the current one."""
        found = []
        trouble = self._runtime.store.retries.trouble()
        if trouble is not None:
            found.append(trouble)
        try:
            self._runtime.store.check_schema()
        except LongcallError as exc:
            found.append(str(exc))
        return found
