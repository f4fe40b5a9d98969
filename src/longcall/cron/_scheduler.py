"""Firing the due occurrences of every schedule, once each, from any number of schedulers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping

from longcall.core.cron import Cron, CronFire, MisfirePolicy
from longcall.core.observed import CronFired, CronMisfired
from longcall.cron._schedule import parse
from longcall.runtime import Runtime
from longcall.store.cron import FirePlan

log = logging.getLogger("longcall.cron")


class Scheduler:
    """Fires due occurrences of every schedule in the app's store.

    ``tick(now)`` does one pass (synchronous; tests give explicit times); ``run(stop)`` ticks
    until ``stop`` is set, waking for the next due occurrence or every ``poll`` seconds to
    see schedules made elsewhere. Start as many as you like, in as many processes: each
    occurrence starts one run.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        batch: int = 100,
        misfire_grace: float = 60.0,
        poll: float = 1.0,
        keep_fires: float = 7 * 86400.0,
        prune_every: float = 3600.0,
        versions: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        if misfire_grace < 0:
            raise ValueError("misfire_grace cannot be negative")
        self.runtime = runtime
        self.batch = batch
        self.misfire_grace = misfire_grace
        self.poll = poll
        self.keep_fires = keep_fires
        self.prune_every = prune_every
        # The version of each workflow its fired runs record (the app's registered ones).
        self.versions = versions or dict
        self.claimed = 0  # occurrences this scheduler claimed (fired, skipped or not)
        self._pruned_at: float | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def plan(self, cron: Cron, now: float) -> FirePlan:
        """Which of ``cron``'s due occurrences fire at ``now``, and its next occurrence.

        A schedule that cannot be evaluated here (its zone unknown to this host, say) stops:
        it fires nothing and gets no next occurrence until it is edited, rather than
        holding up the other schedules of the tick at every poll."""
        try:
            return self._plan(cron, now)
        except Exception:
            log.exception("cron schedule %s (%s) stops", cron.cron_id, cron.name)
            return FirePlan((), None)

    def _plan(self, cron: Cron, now: float) -> FirePlan:
        schedule = parse(cron.expression, cron.timezone)
        first = cron.next_fire_at
        following = schedule.next_after(now)
        if first is None:
            return FirePlan((), following)
        horizon = now - self.misfire_grace
        end = math.floor(now) + 1.0  # occurrences are whole seconds: those <= now
        on_time = list(schedule.occurrences(max(first, horizon), end))
        if first >= horizon:
            return FirePlan(on_time, following)
        policy = cron.misfire_policy
        self.runtime.observers.tell(CronMisfired(policy.value))
        if policy is MisfirePolicy.RUN_ONCE:
            latest = on_time[-1:] or schedule.last_before(horizon, 1, not_before=first)
            return FirePlan(latest, following)
        if policy is MisfirePolicy.CATCH_UP:
            missed = schedule.last_before(horizon, cron.catch_up_max, not_before=first)
            return FirePlan(missed + on_time, following)
        return FirePlan(on_time, following)

    def tick(self, now: float | None = None) -> list[CronFire]:
        """Fire every schedule due at ``now`` (default: the app clock's now); the occurrences
        this scheduler claimed, in the order it claimed them."""
        self.runtime.refuse_in_loop("scheduler.tick")
        return self._tick(now)

    async def tick_async(self, now: float | None = None) -> list[CronFire]:
        """:meth:`tick` on the app's thread pool."""
        return await self.runtime.in_thread(self._tick, now)

    def _tick(self, now: float | None = None) -> list[CronFire]:
        at = self.runtime.clock.now() if now is None else now
        fires: list[CronFire] = []
        while True:
            got, taken = self.runtime.store.fire_due(
                at, lambda cron: self.plan(cron, at), limit=self.batch, versions=self.versions()
            )
            fires += got
            self.claimed += len(got)
            for fire in got:
                self.runtime.observers.tell(CronFired(fire.outcome.value))
            if taken < self.batch:
                break
        if self._pruned_at is None or at - self._pruned_at >= self.prune_every:
            self._pruned_at = at
            self.runtime.store.prune_cron_fires(at - self.keep_fires)
        return fires

    def wake(self) -> None:
        """Tick now instead of at the next due time (from any thread), e.g. after a create."""
        loop, event = self._loop, self._wake
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(event.set)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set; a failed tick (the database away) is logged and tried
        again after ``poll`` seconds."""
        self._loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        try:
            while not stop.is_set():
                wake.clear()
                delay = self.poll
                try:
                    fires = await self.runtime.in_thread(self._tick)
                    if fires:
                        log.debug("cron: %d occurrence(s) claimed", len(fires))
                    due = await self.runtime.in_thread(self.runtime.store.next_cron_due)
                    if due is not None:
                        # Not zero: a due schedule another scheduler is firing right now
                        # (PostgreSQL skips it) would make this loop spin until it commits.
                        delay = min(self.poll, max(0.01, due - self.runtime.clock.now()))
                except Exception:
                    log.exception("cron scheduler: tick failed; retrying in %.1fs", self.poll)
                stopping = asyncio.ensure_future(stop.wait())
                waking = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait(
                        {stopping, waking}, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    for task in (stopping, waking):
                        task.cancel()
                    await asyncio.gather(stopping, waking, return_exceptions=True)
        finally:
            self._loop = self._wake = None
