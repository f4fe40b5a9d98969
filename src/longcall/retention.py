"""The pruner: removes finished work once it is older than its retention period.

The worker runs it every ``interval`` (a minute), and ``longcall prune`` once. Each kind of
record goes oldest first, ``batch`` rows a transaction, with a pause between batches in which
the hot path has the database to itself (on SQLite, one writer at a time, that is what keeps a
prune from holding a job's completion back). What can still change is never removed: see
:mod:`longcall.store._retention` and :class:`~longcall.core.retention.Retention`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from longcall.core.jobs import parse_duration
from longcall.core.retention import Retention
from longcall.runtime import Runtime

log = logging.getLogger("longcall.retention")


class Pruner:
    """Removes what ``retention`` no longer keeps, ``batch`` records a transaction."""

    def __init__(
        self,
        runtime: Runtime,
        retention: Retention,
        *,
        batch: int = 200,
        pause: str | float = "20ms",
        interval: str | float = "1m",
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch!r}")
        self.runtime = runtime
        self.retention = retention
        self.batch = batch
        self.pause = parse_duration(pause)
        self.interval = parse_duration(interval)

    def ages(self) -> dict[str, float]:
        """Per kind of record, the age past which finished ones go (kinds kept forever are
        left out)."""
        periods = {
            "jobs": self.retention.jobs,
            "runs": self.retention.runs,
            "inbox": self.retention.webhooks,
            "early_results": self.retention.webhooks,
        }
        return {kind: period for kind, period in periods.items() if period is not None}

    def prune(
        self, *, dry_run: bool = False, stopping: Callable[[], bool] = lambda: False
    ) -> dict[str, int]:
        """Remove (or with ``dry_run`` count) every record past its period; how many, per
        kind. Blocking: run it in a thread. ``stopping`` is asked between batches: a worker
        told to stop ends the pass there (the next pass goes on where it ended)."""
        store = self.runtime.store
        removed: dict[str, int] = {}
        for kind, age in self.ages().items():
            if dry_run:
                removed[kind] = store.count_prunable(kind, age)
                continue
            total = 0
            while True:
                went = store.prune(kind, age, limit=self.batch)
                total += went
                if went < self.batch or stopping():
                    break
                time.sleep(self.pause)
            removed[kind] = total
        return removed

    async def run(self, stop: asyncio.Event) -> None:
        """Prune every ``interval`` until ``stop`` is set; a failed pass is logged and the
        next one tries again."""
        while not stop.is_set():
            try:
                removed = await self.runtime.in_thread(self.prune, stopping=stop.is_set)
            except Exception:
                log.exception("pruning failed; retrying")
            else:
                if any(removed.values()):
                    log.info("pruned %s", ", ".join(f"{n} {k}" for k, n in removed.items() if n))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
