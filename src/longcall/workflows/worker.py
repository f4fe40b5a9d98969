"""Background runs: workers claim queued runs from the store and execute them.

Any number of worker processes share one store. A worker claims runs with a lease that each
execution renews; a worker that dies (SIGKILL, a lost host) stops renewing, and once the lease
has run out another worker claims the run and resumes it from its checkpoints. Wake-ups come
from commits in this process and, on PostgreSQL, from ``NOTIFY`` to the one worker with room
that holds the watch (:mod:`longcall.store.pg_listen`), not to all of them; a worker's slot
that frees claims the next run as its run ends; polling covers the rest. A slot executing a
sync run executes the next one its end claims in the same thread (a chain), so a backlog
drains without a trip through the event loop for every run.

Cancellation is a flag in the store, so it reaches a run on any worker: the run sees
``ctx.cancelled`` at once and stops at its next task call; an async run still going after
``grace`` is cancelled outright. A run with ``timeoutSecs`` has that long per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from longcall.jobs import parse_duration
from longcall.store.runs import CANCELLED, RUNS_CHANNEL, Held, NextClaim, Run, RunStatus
from longcall.wakeups import watch_in_thread

if TYPE_CHECKING:
    from longcall.app import App

log = logging.getLogger("longcall.runs")


@dataclass(slots=True, eq=False)
class _Slot:
    """One of a worker's slots: the run it executes now (a chain of sync runs moves it on),
    the claim that run's end makes, and how many runs it finished before that one."""

    run: Run
    claim: NextClaim | None = None
    chained: int = 0
    abandoned: bool = False  # done, or cancelled: a chain takes no further run


class RunWorker:
    """Claims and executes background runs, ``concurrency`` at a time."""

    def __init__(
        self,
        app: App,
        *,
        concurrency: int = 8,
        poll_interval: str | float = "1s",
        grace: str | float = "5s",
        holder: str | None = None,
    ) -> None:
        self.app = app
        self.concurrency = concurrency
        self.poll_interval = parse_duration(poll_interval)
        self.grace = parse_duration(grace)
        # Unique per worker: its claims are numbered below, so two workers of one app must
        # not share a prefix.
        self.holder = holder or f"{app.holder}/runs-{uuid.uuid4().hex[:6]}"
        self.active: dict[str, asyncio.Task[Run]] = {}
        self._cancel_seen: dict[str, float] = {}
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        # Set while a slot is free: only then does this worker watch for queued runs.
        self._room = threading.Event()
        self._room.set()
        self._claims = itertools.count(1)
        # Held while a chain moves its slot to the next run, or a slot is given up.
        self._moving = threading.Lock()
        self.executed = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and execute until ``stop`` is set; then let the runs in hand finish."""
        self._loop = loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        self._stop = stop

        def queued() -> None:
            loop.call_soon_threadsafe(wake.set)

        store = self.app.store
        listener_stop = threading.Event()
        listener = watch_in_thread(store, RUNS_CHANNEL, queued, listener_stop, self._room)
        # Without notifications (SQLite), runs queued in this process wake it directly. With
        # them, the watch's NOTIFY alone does: both would wake it twice for one run.
        local = listener is None
        if local:
            store.run_listeners.append(queued)
        watching = asyncio.create_task(self._watch_cancels(stop))
        stopping = asyncio.create_task(self._wake_when(stop))
        try:
            while not stop.is_set():
                wake.clear()
                # Woken by a queued run, a freed slot or the poll. Fewer runs claimed than
                # slots free means the queue is empty: wait for the next wake, not claim again.
                free = self.concurrency - len(self.active)
                if free > 0:
                    try:
                        await self._claim(free)
                    except Exception:
                        log.exception("claiming runs failed; retrying")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await wake.wait()
            while self.active:  # a run ending now may still hand over the next one
                await asyncio.wait(list(self.active.values()))
        finally:
            watching.cancel()
            stopping.cancel()
            if local:
                store.run_listeners.remove(queued)
            listener_stop.set()
            if listener is not None:
                await asyncio.to_thread(listener.join, 5)

    async def _wake_when(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._room.clear()  # a stopping worker takes no more runs: another one watches
        self._wake.set()

    def _new_holder(self) -> str:
        # Each claim gets a holder of its own: a run claimed again later (after a timeout
        # here) is fenced from the execution that lost it, even in this process.
        return f"{self.holder}/{next(self._claims)}"

    async def _claim(self, limit: int) -> None:
        lease = self.app.workflows.lease
        store = self.app.store
        claimed = await self.app.in_thread(
            store.claim_runs, self._new_holder(), limit=limit, lease=lease
        )
        self._start(claimed)

    def _start(self, claimed: list[Held]) -> None:
        for held in claimed:
            run_id = held[0].run_id
            slot = _Slot(held[0])
            task = asyncio.create_task(self._execute(held, slot), name=f"run {run_id}")
            self.active[run_id] = task
            task.add_done_callback(functools.partial(self._done, slot))
        self._room_left()

    def _room_left(self) -> None:
        if len(self.active) < self.concurrency and not self._stop.is_set():
            self._room.set()
        else:
            self._room.clear()

    def _next_claim(self, slot: _Slot, take: Callable[[list[Held]], None]) -> NextClaim:
        """The claim of the statement that ends the slot's run: the next run for the slot,
        unless the worker is stopping or the slot was given up by then."""
        slot.claim = NextClaim(
            self._new_holder(),
            self.app.workflows.lease,
            1,
            take,
            wanted=lambda: not (self._stop.is_set() or slot.abandoned),
        )
        return slot.claim

    def _claimed_meanwhile(self, claimed: list[Held]) -> None:
        """From the thread that ended a run and claimed the next in the same statement."""
        try:
            self._loop.call_soon_threadsafe(self._start, claimed)
        except RuntimeError:  # the loop is gone: the runs' leases run out, others take them
            log.warning("claimed %d runs after the worker stopped", len(claimed))

    def _done(self, slot: _Slot, task: asyncio.Task[Run]) -> None:
        with self._moving:
            slot.abandoned = True
            self.active.pop(slot.run.run_id, None)
        self._cancel_seen.pop(slot.run.run_id, None)
        self.executed += 1 + slot.chained
        self._room_left()
        # The freed slot looks for the next run now, not at the next poll, unless the
        # statement that ended the run has just looked. The end of a run with a concurrency
        # key looks again: it frees the next run of its key, which that statement could not
        # see yet.
        ended = None if task.cancelled() or task.exception() else task.result()
        looked = slot.claim is not None and slot.claim.looked
        if not looked or (ended and ended.concurrency_key):
            self._wake.set()

    def _chains(self, run: Run) -> bool:
        """Whether the run can execute in a chain (:meth:`_chain`): a registered sync
        workflow, nothing the event loop must watch (a timeout), nothing to release at its
        end (a concurrency key)."""
        wf = self.app.workflows.registry.get(run.workflow_id)
        return (
            wf is not None
            and not wf.is_async
            and not run.timeout_secs
            and run.concurrency_key is None
            and not run.cancel_requested
        )

    def _chain(self, held: Held, slot: _Slot) -> Run:
        """Execute a sync run in this thread, then each run its end claims for the slot, as
        long as they can chain too: a backlog drains without a trip through the event loop
        for every run. The slot moves on to each run in turn, under its key in ``active``."""
        workflows = self.app.workflows
        while True:
            claimed: list[Held] = []
            ended = workflows.execute(held, then_claim=self._next_claim(slot, claimed.extend))
            if not claimed:
                return ended
            with self._moving:
                if slot.abandoned or not self._chains(claimed[0][0]):
                    self._claimed_meanwhile(claimed)
                    return ended
                held, finished = claimed[0], slot.run.run_id
                slot.run = held[0]
                slot.chained += 1
                self.active[slot.run.run_id] = self.active[finished]  # the count stays put
                del self.active[finished]
            self._cancel_seen.pop(finished, None)

    async def _execute(self, held: Held, slot: _Slot) -> Run:
        run = held[0]
        workflows = self.app.workflows
        try:
            if self._chains(run):
                return await self.app.in_thread(self._chain, held, slot)
            then_claim = self._next_claim(slot, self._claimed_meanwhile)
            execution = workflows.execute_async(held, then_claim=then_claim)
            if run.timeout_secs:
                return await asyncio.wait_for(execution, run.timeout_secs)
            return await execution
        except TimeoutError:
            error = {"type": "Timeout", "message": f"the attempt ran over {run.timeout_secs:g}s"}
            return await self.app.in_thread(workflows.end, run, RunStatus.FAILED, error=error)
        except asyncio.CancelledError:
            # Cancelled after its grace period (the run was asked to stop), or shutting down
            # hard: record the cancellation only in the first case. A chain stops here.
            with self._moving:
                slot.abandoned = True
                run = slot.run
            if run.run_id in self._cancel_seen:
                return await self.app.in_thread(
                    workflows.end, run, RunStatus.CANCELLED, error=CANCELLED
                )
            raise
        except Exception:
            log.exception("executing run %s failed", slot.run.run_id)
            return await self.app.in_thread(self.app.store.get_run, slot.run.run_id)

    async def _watch_cancels(self, stop: asyncio.Event) -> None:
        """Cancel outright the runs still going ``grace`` seconds after a cancel request."""
        interval = max(0.2, min(1.0, self.grace / 4))
        while not stop.is_set():
            await asyncio.sleep(interval)
            if not self.active:
                continue
            try:
                flagged = await self.app.in_thread(self._cancelling)
            except Exception:
                log.exception("checking for cancelled runs failed")
                continue
            now = time.monotonic()
            for run_id in flagged:
                task = self.active.get(run_id)
                if task is None:  # it ended meanwhile, perhaps in a chain that moved on
                    continue
                first = self._cancel_seen.setdefault(run_id, now)
                if now - first >= self.grace:
                    task.cancel()

    def _cancelling(self) -> set[str]:
        return self.app.store.cancelling_runs(f"{self.holder}/")
