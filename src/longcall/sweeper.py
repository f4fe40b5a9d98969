"""The sweeper: answers for results that never come.

Started jobs past their deadline become ``expired`` with a result that says so, through the
same conditional update as any completion (so a completion racing the deadline either wins
or becomes a recorded no-op), and are resumed like any other job. Each expiry queues a
``cancel`` outbox item so the tool's ``on_cancel`` hook can stop the external work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from longcall.jobs import Job, JobState, describe_duration, parse_duration

if TYPE_CHECKING:
    from longcall.app import App

log = logging.getLogger("longcall.sweeper")


def expired_result(job: Job) -> dict[str, object]:
    """The result an expired job answers its call with."""
    if job.deadline_at is None:
        message = "No result arrived in time."
    else:
        message = f"No result within {describe_duration(job.deadline_at - job.created_at)}."
    return {"message": message, "deadlineAt": job.deadline_at}


class Sweeper:
    """Expires overdue jobs, ``batch`` at a time."""

    def __init__(self, app: App, *, batch: int = 500, interval: str | float = "5s") -> None:
        self.app = app
        self.batch = batch
        self.interval = parse_duration(interval)

    def sweep(self) -> list[Job]:
        """Expire every overdue job now; return the ones this call expired."""
        store = self.app.store
        expired = []
        while True:
            overdue = store.overdue(self.batch)
            for job in overdue:
                outcome = store.finish(
                    job.job_id, JobState.EXPIRED, expired_result(job), request_cancel=True
                )
                if outcome.changed:
                    expired.append(outcome.job)
                    log.info("job %s expired", job.job_id)
            if len(overdue) < self.batch:
                return expired

    async def run_once(self) -> list[Job]:
        return await self.app.in_thread(self.sweep)

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
                    await self.app.in_thread(each_pass)
                except Exception:
                    log.exception("the sweeper's companion task failed; retrying")
            try:
                await self.run_once()
            except Exception:
                log.exception("sweep failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
