"""Jobs listed, searched, followed as they change, and counted: what the API, the dashboard
and the metrics read, each at a cost that does not grow with the number of jobs stored.

A listing walks the index that fits its filters, newest first, and stops at its limit. A
search reads at most a window of jobs per page (the newest the filters let through) and says
where the next page goes on, so a search with few matches among a million jobs is many cheap
pages, never one scan of the table. The counts are kept by triggers as jobs change
(schema 14) and read as a handful of rows.
"""

from __future__ import annotations

from longcall.core.jobs import Delivery, Job, JobPage, JobState
from longcall.store.core import Row, StoreCore, contains_pattern, job_from_row

SEARCH_WINDOW = 5_000  # jobs a search page reads at most


class ListingOps(StoreCore):
    """Listings, searches, changes and counts of jobs; part of :class:`~longcall.store.Store`."""

    def list_jobs(
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
    ) -> list[Job]:
        """Newest first; ``before`` is the (created_at, job_id) of the last job of a page.

        ``text`` keeps the jobs whose id, tool, session, user, call id or arguments (as JSON)
        contain it, in any case of ASCII letters (PostgreSQL: of any letters); ``%``, ``_``
        and ``\\`` in it are taken literally. It reads every job the other filters let
        through until ``limit`` match: :meth:`page_jobs` bounds what one page reads.
        """
        params = _filters(state, tool_name, session_id, user_id, delivery, before)
        params["pattern"] = contains_pattern(text) if text else None
        params["limit"] = limit
        rows = self._transact(lambda tx: tx.all("list_jobs", **params), write=False)
        return [job_from_row(r) for r in rows]

    def page_jobs(
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
        window: int = SEARCH_WINDOW,
    ) -> JobPage:
        """One page of a listing, as :meth:`list_jobs` filters it, reading at most ``window``
        jobs when it searches ``text``: a search page may hold fewer than ``limit`` jobs and
        still have a next page, where the search goes on among older jobs."""
        if not text:
            jobs = self.list_jobs(
                state=state,
                tool_name=tool_name,
                session_id=session_id,
                user_id=user_id,
                delivery=delivery,
                before=before,
                limit=limit,
            )
            return JobPage(jobs, _key(jobs[-1]) if len(jobs) == limit else None)
        params = _filters(state, tool_name, session_id, user_id, delivery, before)
        params.update(pattern=contains_pattern(text), limit=limit, window=window)
        rows = self._transact(lambda tx: tx.all("search_jobs", **params), write=False)
        jobs = [job_from_row(r) for r in rows if r["hit"]][:limit]
        if len(jobs) == limit:
            return JobPage(jobs, _key(jobs[-1]))
        last_read = [r for r in rows if r["nth"] == window]
        return JobPage(jobs, _row_key(last_read[0]) if last_read else None)

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
        params = {
            "since": since,
            "after_id": after_id,
            "user_id": user_id,
            "session_id": session_id,
            "tool_name": tool_name,
            "limit": limit,
        }
        rows = self._transact(lambda tx: tx.all("changed_jobs", **params), write=False)
        return [job_from_row(r) for r in rows]

    def last_change(self) -> float | None:
        """When the most recently changed job changed (None with no jobs)."""
        row = self._transact(lambda tx: tx.one("last_change"), write=False)
        return None if row is None or row["at"] is None else float(row["at"])

    def counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (state, delivery), as the triggers have counted them."""
        rows = self._transact(lambda tx: tx.all("count_jobs"), write=False)
        return {(r["state"], r["delivery"]): int(r["n"]) for r in rows}

    def fold_counts(self) -> None:
        """Fold the changes counted since the last fold into the counts (PostgreSQL), or drop
        the counts that reached zero (SQLite): what keeps :meth:`counts` a few rows' read."""
        self._transact(lambda tx: tx.run("fold_job_counts"))


def _filters(
    state: JobState | None,
    tool_name: str | None,
    session_id: str | None,
    user_id: str | None,
    delivery: Delivery | None,
    before: tuple[float, str] | None,
) -> dict[str, object]:
    return {
        "state": state.value if state else None,
        "tool_name": tool_name,
        "session_id": session_id,
        "user_id": user_id,
        "delivery": delivery.value if delivery else None,
        "before_created": before[0] if before else None,
        "before_id": before[1] if before else None,
    }


def _key(job: Job) -> tuple[float, str]:
    return job.created_at, job.job_id


def _row_key(row: Row) -> tuple[float, str]:
    return float(row["created_at"]), str(row["job_id"])
