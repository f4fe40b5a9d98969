"""Background runs: workers claim queued runs from the store and execute them.

Any number of worker processes share one store. A worker claims runs with a lease that each
execution renews; a worker that dies (SIGKILL, a lost host) stops renewing, and once the lease
has run out another worker claims the run and resumes it from its checkpoints. Wake-ups come
from commits in this process and, on PostgreSQL, from ``NOTIFY`` to the one worker with room
that holds the watch (:mod:`longcall.store._pg_listen`), not to all of them; a worker's slot
that frees claims the next run as its run ends; polling covers the rest. A slot executing a
sync run executes the next one its end claims in the same thread (a chain), so a backlog
drains without a trip through the event loop for every run. A notification is taken up the
same way: the watch's thread hands the claim to a pool thread, which executes the sync runs
it claimed there, and the event loop hears of them only if they cannot chain.

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
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from longcall.core.jobs import parse_duration
from longcall.core.runs import Run, RunStatus
from longcall.logs import about
from longcall.store.runs import CANCELLED, RUNS_CHANNEL, Held, NextClaim, due_in
from longcall.store.wakeups import watch_in_thread
from longcall.workflows.runs import Workflows

log = logging.getLogger("longcall.runs")


@dataclass(slots=True, eq=False)
class _Slot:
    """One of a worker's slots: the run it executes now (a chain of sync runs moves it on),
    the claim that run's end makes, and how many runs it finished before that one."""

    run: Run
    claim: NextClaim | None = None
    chained: int = 0
    abandoned: bool = False  # done, or cancelled: a chain takes no further run
    heard: int = 0  # the worker's notifications heard as the run's end looked for the next


class RunWorker:
    """Claims and executes background runs, ``concurrency`` at a time.

    ``claim_delay`` (PostgreSQL): while this worker's runs end, and look for their next,
    more often than that, a run queued meanwhile waits up to that long for one of them to
    take it, rather than being claimed at once beside them. A steady stream of short runs
    then drains in two statements a run instead of three; an idle worker, or one whose runs
    are long, claims at once. 0 claims every run at once.

    ``wake_ahead``: a run asleep in this process is claimed up to this long before it wakes,
    and started when it is due, not before: the claim's round trip (several milliseconds on
    a busy PostgreSQL) is done by then, instead of added to the timer's latency. Its slot is
    held, idle, meanwhile. 0 claims a sleeping run only once it is due.
    """

    def __init__(
        self,
        workflows: Workflows,
        *,
        concurrency: int = 8,
        poll_interval: str | float = "1s",
        grace: str | float = "5s",
        claim_delay: str | float = "20ms",
        wake_ahead: str | float = "50ms",
        holder: str | None = None,
        queues: Sequence[str] | None = None,
    ) -> None:
        self.workflows = workflows
        # Named queues to claim from: None is every declared queue and the runs of none;
        # a list, only those queues' runs.
        self.queues = None if queues is None else tuple(queues)
        self._queue_names: tuple[float, list[str]] = (-math.inf, [])
        self.runtime = workflows.runtime
        self.concurrency = concurrency
        self.poll_interval = parse_duration(poll_interval)
        self.grace = parse_duration(grace)
        # While the runs in hand end, and look for the next, more often than this, a run
        # queued meanwhile is left to them for up to this long instead of claimed at once.
        self.claim_delay = parse_duration(claim_delay)
        self.wake_ahead = parse_duration(wake_ahead)
        # Unique per worker: its claims are numbered below, so two workers of one app must
        # not share a prefix.
        self.holder = holder or f"{workflows.runtime.holder}/runs-{uuid.uuid4().hex[:6]}"
        self.active: dict[str, asyncio.Task[Run]] = {}
        # Runs executing in the pool threads a notification started (no task of their own),
        # and slots held for runs being claimed: both count against ``concurrency``.
        self._direct: dict[str, _Slot] = {}
        self._reserved = 0
        self._heard = 0  # notifications the watch passed on
        self._last_look = -math.inf  # when a chain last looked for its next run
        self._deferred = 0  # notifications left to the chains, not looked for since
        # A sleeping run's wake-up came and the event loop's claim has not yet looked with a
        # slot to spare: the next slot to free looks again, even if its run's end has looked.
        # That look takes only runs due now, and a run due a little later, whose wake-up
        # came while every slot was taken, would otherwise wait for the poll.
        self._timers_waiting = False
        self._recheck_due = False
        self._cancel_seen: dict[str, float] = {}
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        # Set while a slot is free: only then does this worker watch for queued runs.
        self._room = threading.Event()
        self._room.set()
        self._claims = itertools.count(1)
        # Held while slots are counted, reserved, moved to the next run or given up.
        self._moving = threading.Lock()
        self.executed = 0

    @property
    def registered(self) -> frozenset[tuple[str, str]]:
        """The (workflow, version) pairs this worker claims runs of: those its app registers
        at the claim (a workflow registered after the worker started included). A run of any
        other stays queued for a worker that has it."""
        return self.workflows.registered()

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and execute until ``stop`` is set; then let the runs in hand finish."""
        self._loop = loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        self._stop = stop

        def queued() -> None:
            loop.call_soon_threadsafe(wake.set)

        def notified() -> None:
            self._heard += 1
            if (self._direct or self.active) and (
                time.monotonic() - self._last_look < self.claim_delay
            ):
                self._defer()
            elif not self._claim_directly():
                queued()

        store = self.runtime.store
        listener_stop = threading.Event()
        listener = watch_in_thread(store, RUNS_CHANNEL, notified, listener_stop, self._room)
        # Without notifications (SQLite), runs queued in this process wake it directly. With
        # them, the watch's NOTIFY alone does: both would wake it twice for one run.
        local = listener is None
        if local:
            store.run_listeners.append(queued)

        def asleep(wake_at: float) -> None:
            # Half the lead covers the claim's round trip, the other half a wake-up that
            # comes late and the clocks being apart. Without a lead, a little late rather
            # than early: the claim compares with the database's clock.
            lead = self.wake_ahead / 2 if self.wake_ahead else -0.002
            delay = max(0.0, wake_at - self.runtime.clock.now() - lead)
            with contextlib.suppress(RuntimeError):  # the loop has closed: the poll finds it
                loop.call_soon_threadsafe(loop.call_later, delay, self._timer_fired)

        self.workflows.sleep_listeners.append(asleep)
        watching = asyncio.create_task(self._watch_cancels(stop))
        stopping = asyncio.create_task(self._wake_when(stop))
        try:
            while not stop.is_set():
                wake.clear()
                # Woken by a queued run, a freed slot or the poll. Fewer runs claimed than
                # slots free means the queue is empty: wait for the next wake, not claim again.
                try:
                    await self._claim()
                except Exception:
                    log.exception("claiming runs failed; retrying")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await wake.wait()
            # A run ending now may still hand over the next one.
            while self.active or self._direct or self._reserved:
                if self.active:
                    await asyncio.wait(list(self.active.values()))
                else:
                    await asyncio.sleep(0.01)
        finally:
            watching.cancel()
            stopping.cancel()
            self.workflows.sleep_listeners.remove(asleep)
            if local:
                store.run_listeners.remove(queued)
            listener_stop.set()
            if listener is not None:
                await asyncio.to_thread(listener.join, 5)

    def _timer_fired(self) -> None:
        self._timers_waiting = True
        self._wake.set()

    async def _wake_when(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._room.clear()  # a stopping worker takes no more runs: another one watches
        self._wake.set()

    def _new_holder(self) -> str:
        # Each claim gets a holder of its own: a run claimed again later (after a timeout
        # here) is fenced from the execution that lost it, even in this process.
        return f"{self.holder}/{next(self._claims)}"

    def _reserve(self) -> int:
        """Hold every free slot for a claim (zero when full or stopping); the claim's runs
        take them over in :meth:`_start`, and :meth:`_release` gives back the rest."""
        with self._moving:
            if self._stop.is_set():
                return 0
            free = self.concurrency - len(self.active) - len(self._direct) - self._reserved
            self._reserved += max(free, 0)
        return max(free, 0)

    def _release(self, count: int) -> None:
        with self._moving:
            self._reserved -= count
        self._room_left()

    def _claim_runs(self, limit: int, ahead: float = 0.0) -> list[Held]:
        lease = self.workflows.lease
        store = self.runtime.store
        claimed: list[Held] = []
        names = self._listened()
        if names:
            claimed = store.claim_queue_runs(
                self._new_holder(),
                worker=f"{self.holder}/",
                limit=limit,
                lease=lease,
                names=names,
                registered=self.registered,
            )
        if len(claimed) < limit and self.queues is None:
            claimed += store.claim_runs(
                self._new_holder(),
                limit=limit - len(claimed),
                lease=lease,
                registered=self.registered,
                ahead=ahead,
            )
        return claimed

    def _claim_ahead(self, limit: int) -> tuple[list[Held], float]:
        """The event loop's claim, runs due within ``wake_ahead`` included, and when it
        returned (``time.monotonic``, the loop's clock), which their due times count from."""
        claimed = self._claim_runs(limit, self.wake_ahead)
        return claimed, time.monotonic()

    def _listened(self) -> list[str]:
        """The named queues this worker claims from; every declared one is read again from
        the store once a poll interval, so a worker with no queues pays no extra statement."""
        if self.queues is not None:
            return list(self.queues)
        read_at, names = self._queue_names
        if time.monotonic() - read_at >= self.poll_interval:
            names = [q.name for q in self.runtime.store.queues()]
            self._queue_names = (time.monotonic(), names)
        return names

    async def _claim(self) -> None:
        limit = self._reserve()
        if not limit:
            return  # any timer that fired waits for the next slot to free
        timers, self._timers_waiting = self._timers_waiting, False
        try:
            claimed, returned = await self.runtime.in_thread(self._claim_ahead, limit)
        except BaseException:
            self._timers_waiting |= timers
            self._release(limit)
            raise
        # Every slot filled: the fired timers' runs may not all have fit.
        self._timers_waiting |= timers and len(claimed) >= limit
        self._start(claimed, limit, returned)

    def _start(self, claimed: list[Held], reserved: int, returned: float | None = None) -> None:
        """Execute the claimed runs as tasks of the event loop, in ``reserved`` slots held.
        With ``returned`` (when a claim with ``wake_ahead`` returned), a run not due yet
        starts when it is: its slot stays reserved until then."""
        lease = self.workflows.lease
        later: list[tuple[float, Held]] = []
        with self._moving:
            for held in claimed:
                if returned is not None and (wait := due_in(held[0], lease)) > 0:
                    later.append((returned + wait, held))
                else:
                    self._begin(held)
            self._reserved -= reserved - len(later)
        for when, held in later:
            # Counted from the claim's return, which is after the database's clock read the
            # time: late by the trip back, never early.
            self._loop.call_at(when, self._start_due, held)
        self._room_left()

    def _begin(self, held: Held) -> None:
        run_id = held[0].run_id
        slot = _Slot(held[0])
        task = asyncio.create_task(self._execute(held, slot), name=f"run {run_id}")
        self.active[run_id] = task
        task.add_done_callback(functools.partial(self._done, slot))

    def _start_due(self, held: Held) -> None:
        with self._moving:
            self._begin(held)
            self._reserved -= 1
        self._room_left()

    def _claim_directly(self) -> bool:
        """From the watch's thread, as runs are queued: claim for every free slot in a pool
        thread, not through the event loop. False when no slot is free (or the worker is
        stopping): nothing was started."""
        limit = self._reserve()
        if not limit:
            return False
        try:
            self.runtime.call_in_thread(self._claim_in_thread, limit, self._heard)
        except RuntimeError:  # the pool is shut down: the app is closing
            self._release(limit)
            return False
        return True

    def _claim_in_thread(self, limit: int, heard: int) -> None:
        """Claim up to ``limit`` runs in the slots reserved for them, and execute the sync
        ones in pool threads (this one takes the first); the others go to the event loop.
        ``heard``: the notifications passed on when the slots were reserved."""
        try:
            claimed = self._claim_runs(limit)
        except BaseException:
            self._release(limit)
            log.exception("claiming runs failed; the next poll retries")
            return
        chained: list[tuple[Held, _Slot]] = []
        others: list[Held] = []
        for held in claimed:
            if self._chains(held[0]):
                chained.append((held, _Slot(held[0])))
            else:
                others.append(held)
        with self._moving:
            for _, slot in chained:
                self._direct[slot.run.run_id] = slot
            self._reserved -= limit - len(others)  # the others keep theirs until started
        if others:
            self._to_loop(others, len(others))
        self._room_left()
        if len(claimed) < limit and self._heard != heard:
            # A run queued during the claim found no slot to reserve, and the claim may have
            # looked before it was there: the event loop looks again. Only now, with the
            # slots the claim did not fill given back (and the others' handed to the loop
            # ahead of this wake): woken earlier, the loop found every slot still reserved
            # and waited for the next poll.
            self._wake_soon()
        for held, slot in chained[1:]:
            try:
                self.runtime.call_in_thread(self._execute_directly, held, slot)
            except RuntimeError:  # the app is closing: the run's lease runs out, others take it
                self._free_direct(slot)
        if chained:
            self._execute_directly(*chained[0])

    def _execute_directly(self, held: Held, slot: _Slot) -> None:
        try:
            self._chain(held, slot, self._direct)
        except Exception:
            log.exception(
                "executing run %s failed", slot.run.run_id, extra=about(run_id=slot.run.run_id)
            )
        finally:
            self._free_direct(slot)  # unless the cancel watcher has given it up already
            with self._moving:
                self.executed += 1 + slot.chained
            self._cancel_seen.pop(slot.run.run_id, None)
        self._room_left()
        if self._timers_waiting or not (slot.claim is not None and slot.claim.looked):
            self._wake_soon()

    def _free_direct(self, slot: _Slot, run_id: str | None = None) -> Run | None:
        """Give up a slot a notification started, once: the run it held, or None when it
        was given up already (or, with ``run_id``, its chain has moved on to another run)."""
        with self._moving:
            if slot.abandoned or run_id not in (None, slot.run.run_id):
                return None
            slot.abandoned = True
            # Another slot's chain may hold the same run by now (it ended here, was woken,
            # and claimed there at once, as a parent woken by its child is): keep its entry.
            if self._direct.get(slot.run.run_id) is slot:
                del self._direct[slot.run.run_id]
            return slot.run

    def _defer(self) -> None:
        """Leave a queued run to the chains in hand, which look for their next run as each
        ends: claiming it at once would start one more chain beside them, and each would
        then find the queue empty more often, a claim statement more per run. Should none
        of them take it within ``claim_delay``, it is claimed then."""
        with self._moving:
            self._deferred += 1
            arm, self._recheck_due = not self._recheck_due, True
        if arm:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to claim for
                self._loop.call_soon_threadsafe(
                    self._loop.call_later, self.claim_delay, self._recheck
                )

    def _recheck(self) -> None:
        with self._moving:
            deferred, self._deferred, self._recheck_due = self._deferred, 0, False
        if deferred and not self._claim_directly():
            self._wake.set()

    def _looked(self, slot: _Slot, found: bool) -> None:
        """A chain's end looked for the next run: one found answers a deferred notification;
        none found, every one heard before the look began."""
        with self._moving:
            self._last_look = time.monotonic()
            if found:
                self._deferred = max(self._deferred - 1, 0)
            else:
                self._deferred = min(self._deferred, self._heard - slot.heard)

    def _wake_soon(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nothing left to wake
            self._loop.call_soon_threadsafe(self._wake.set)

    def _room_left(self) -> None:
        # Slots held for a claim in flight do not count: the worker keeps the watch while it
        # claims, or every claim would hand it on and take it back.
        busy = len(self.active) + len(self._direct)
        if busy < self.concurrency and not self._stop.is_set():
            self._room.set()
        else:
            self._room.clear()

    def _next_claim(self, slot: _Slot, take: Callable[[list[Held]], None]) -> NextClaim:
        """The claim of the statement that ends the slot's run: the next run for the slot,
        unless the worker is stopping or the slot was given up by then."""
        slot.claim = NextClaim(
            self._new_holder(),
            self.workflows.lease,
            1,
            take,
            wanted=functools.partial(self._wanted, slot),
            registered=self.registered,
        )
        return slot.claim

    def _wanted(self, slot: _Slot) -> bool:
        """Called as the slot's run ends, just before its statement looks for the next."""
        slot.heard = self._heard
        # A worker of named queues only claims through their claim (the loop's).
        return not (self._stop.is_set() or slot.abandoned) and self.queues is None

    def _claimed_meanwhile(self, claimed: list[Held]) -> None:
        """From the thread that ended a run and claimed the next in the same statement."""
        with self._moving:
            self._reserved += len(claimed)  # counted until the loop starts them
        self._to_loop(claimed, len(claimed))

    def _to_loop(self, claimed: list[Held], reserved: int) -> None:
        try:
            self._loop.call_soon_threadsafe(self._start, claimed, reserved)
        except RuntimeError:  # the loop is gone: the runs' leases run out, others take them
            self._release(reserved)
            log.warning("claimed %d runs after the worker stopped", len(claimed))

    def _done(self, slot: _Slot, task: asyncio.Task[Run]) -> None:
        with self._moving:
            slot.abandoned = True
            if self.active.get(slot.run.run_id) is task:  # see _free_direct
                del self.active[slot.run.run_id]
            self.executed += 1 + slot.chained
        self._cancel_seen.pop(slot.run.run_id, None)
        self._room_left()
        # The freed slot looks for the next run now, not at the next poll, unless the
        # statement that ended the run has just looked. The end of a run with a concurrency
        # key looks again: it frees the next run of its key, which that statement could not
        # see yet.
        ended = None if task.cancelled() or task.exception() else task.result()
        looked = slot.claim is not None and slot.claim.looked
        # So does the end of a queued run: it frees a slot of its queue.
        frees_more = ended is not None and bool(ended.concurrency_key or ended.queue_name)
        if self._timers_waiting or not looked or frees_more:
            self._wake.set()

    def _chains(self, run: Run) -> bool:
        """Whether the run can execute in a chain (:meth:`_chain`): a registered sync
        workflow, nothing the event loop must watch (a timeout), nothing to release at its
        end (a concurrency key)."""
        wf = self.workflows.registry.get(run.workflow_id)
        return (
            wf is not None
            and not wf.is_async
            and not run.timeout_secs
            and run.concurrency_key is None
            and run.queue_name is None
            and not run.cancel_requested
        )

    def _chain(self, held: Held, slot: _Slot, slots: dict[str, _Slot] | None = None) -> Run:
        """Execute a sync run in this thread, then each run its end claims for the slot, as
        long as they can chain too: a backlog drains without a trip through the event loop
        for every run. The slot moves on to each run in turn, under its key in ``active``
        (or in ``slots``, for a slot a notification started)."""
        moves: dict[str, Any] = self.active if slots is None else slots
        workflows = self.workflows
        while True:
            claimed: list[Held] = []
            ended = workflows.execute(held, then_claim=self._next_claim(slot, claimed.extend))
            if slot.claim is not None and slot.claim.looked:
                self._looked(slot, bool(claimed))
            if not claimed:
                return ended
            with self._moving:
                handed_on = slot.abandoned or not self._chains(claimed[0][0])
                if not handed_on:
                    held, finished = claimed[0], slot.run.run_id
                    slot.run = held[0]
                    slot.chained += 1
                    moves[slot.run.run_id] = moves.pop(finished)  # the count stays put
            if handed_on:
                self._claimed_meanwhile(claimed)
                return ended
            self._cancel_seen.pop(finished, None)

    async def _execute(self, held: Held, slot: _Slot) -> Run:
        run = held[0]
        workflows = self.workflows
        try:
            if self._chains(run):
                return await self.runtime.in_thread(self._chain, held, slot)
            then_claim = self._next_claim(slot, self._claimed_meanwhile)
            execution = workflows.execute_async(held, then_claim=then_claim)
            if run.timeout_secs:
                return await asyncio.wait_for(execution, run.timeout_secs)
            return await execution
        except TimeoutError:
            error = {"type": "Timeout", "message": f"the attempt ran over {run.timeout_secs:g}s"}
            return await self.runtime.in_thread(workflows.end, run, RunStatus.FAILED, error=error)
        except asyncio.CancelledError:
            # Cancelled after its grace period (the run was asked to stop), or shutting down
            # hard: record the cancellation only in the first case. A chain stops here.
            with self._moving:
                slot.abandoned = True
                run = slot.run
            if run.run_id in self._cancel_seen:
                return await self.runtime.in_thread(
                    workflows.end, run, RunStatus.CANCELLED, error=CANCELLED
                )
            raise
        except Exception:
            log.exception("executing run %s failed", slot.run.run_id)
            return await self.runtime.in_thread(self.runtime.store.get_run, slot.run.run_id)

    async def _watch_cancels(self, stop: asyncio.Event) -> None:
        """Cancel outright the runs still going ``grace`` seconds after a cancel request."""
        interval = max(0.2, min(1.0, self.grace / 4))
        while not stop.is_set():
            await asyncio.sleep(interval)
            if not (self.active or self._direct):
                continue
            try:
                flagged = await self.runtime.in_thread(self._cancelling)
            except Exception:
                log.exception("checking for cancelled runs failed")
                continue
            now = time.monotonic()
            for run_id in flagged:
                task, slot = self.active.get(run_id), self._direct.get(run_id)
                if task is None and slot is None:  # it ended meanwhile, or its chain moved on
                    continue
                first = self._cancel_seen.setdefault(run_id, now)
                if now - first < self.grace:
                    continue
                if task is not None:
                    task.cancel()
                elif slot is not None:
                    await self._give_up(slot, run_id)

    async def _give_up(self, slot: _Slot, run_id: str) -> None:
        """A sync run in a pool thread, still going after the grace period: recorded
        cancelled, which fences the thread's further writes, and its slot freed, as a task's
        cancellation does; the thread itself stops at its next checkpoint."""
        run = self._free_direct(slot, run_id)
        if run is None:
            return
        self._room_left()
        await self.runtime.in_thread(self.workflows.end, run, RunStatus.CANCELLED, error=CANCELLED)
        self._wake.set()

    def _cancelling(self) -> set[str]:
        return self.runtime.store.cancelling_runs(f"{self.holder}/")
