"""The sweeper: answers for results that never come.

Started jobs past their deadline become ``expired`` with a result that says so, and are
resumed like any other job. Each expiry queues a ``cancel`` outbox item so the tool's
``on_cancel`` hook can stop the external work.

The sweeper is not what makes a deadline hold: a result that arrives at or after the
deadline is refused by the conditional terminal update itself, which expires the job there
and then (:meth:`Store.finish <longcall.store.base.Store.finish>`). Both compare the deadline
with the same clock, the database's unless a test clock is set, under the same rule
(``deadline_at <= now`` is overdue), so the outcome does not depend on when the sweeper ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from longcall.core.jobs import Job, expired_result, parse_duration
from longcall.logs import about
from longcall.runtime import Runtime

log = logging.getLogger("longcall.sweeper")

__all__ = ["Sweeper", "expired_result"]  # expired_result: where it used to live


class Sweeper:
    """Expires overdue jobs, ``batch`` at a time."""

    def __init__(self, runtime: Runtime, *, batch: int = 500, interval: str | float = "5s") -> None:
        self.runtime = runtime
        self.batch = batch
        self.interval = parse_duration(interval)

    def sweep(self) -> list[Job]:
        """Expire every overdue job now; return the ones this call expired. Then fold the job
        counts kept for the metrics, so that reading them stays a few rows' work."""
        store = self.runtime.store
        expired = []
        while True:
            overdue = store.overdue(self.batch)
            for job in overdue:
                done = store.expire(job)
                if done is not None:
                    expired.append(done)
                    log.info("job %s expired", job.job_id, extra=about(job))
            if len(overdue) < self.batch:
                break
        store.fold_counts()
        return expired

    async def run_once(self) -> list[Job]:
        return await self.runtime.in_thread(self.sweep)

    async def run(
        self, stop: asyncio.Event, *, each_pass: Callable[[], object] | None = None
    ) -> None:
        """Sweep every ``interval`` until ``stop`` is set. ``each_pass`` (blocking, run in the
        app's pool) goes first on every pass: the worker's heartbeat rides on this loop
        instead of waking on a timer of its own. Its failure is logged; the sweep still runs.
        """
        while not stop.is_set():
            if each_pass is not None:
                try:
                    await self.runtime.in_thread(each_pass)
                except Exception:
                    log.exception("the sweeper's companion task failed; retrying")
            try:
                await self.run_once()
            except Exception:
                log.exception("sweep failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
