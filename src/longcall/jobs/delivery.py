"""The deliverer: hands finished jobs back to the agent, once each, one run per session at a time.

A pass claims ready jobs together with their sessions' leases (so it never runs while a user
turn or another resume holds the session), groups each session's jobs by invocation (google-adk
refuses responses to calls of two invocations in one message), delivers each group as one
message of function responses with the original call ids and tool names, and marks the jobs
delivered. Before delivering a final response it asks the agent whether the session already
holds it: a holder that crashed after the agent stored the response but before marking it
delivered must not cause a second delivery.

Its loop keeps up to ``deliveries`` sessions in flight at once, each as its own task: while
one session's agent turn runs, the loop goes on claiming for the free slots, so a slow turn
never holds back another session's delivery. Within a session deliveries stay one at a
time and in order: the session's lease is held for the whole of its delivery, and the loop
never starts a second delivery into a session it is still delivering to.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable

from longcall.agents import AgentEvent, AgentRunner, Fence, FunctionResponse, Message
from longcall.core.backoff import exponential
from longcall.core.jobs import (
    Delivery,
    Job,
    SessionKey,
    final_response,
    parse_duration,
    progress_response,
)
from longcall.errors import FenceLost, UnknownCallError
from longcall.jobs.engine import Jobs
from longcall.jobs.observer import CallObserver
from longcall.logs import about
from longcall.runtime import new_holder_id
from longcall.store.core import NOTIFY_CHANNEL
from longcall.store.wakeups import listen_in_thread, wait_any
from longcall.telemetry import APP_NAME, DELIVERY_OUTCOME, SESSION_ID, USER_ID

log = logging.getLogger("longcall.delivery")


def check_deliveries(deliveries: int) -> int:
    """``deliveries`` (sessions delivered to at once) if it is a whole number of at least 1;
    ValueError naming it otherwise."""
    if isinstance(deliveries, bool) or not isinstance(deliveries, int) or deliveries < 1:
        raise ValueError(
            "deliveries (sessions delivered to at once) must be a whole number of at least 1,"
            f" not {deliveries!r}"
        )
    return deliveries


def group_by_invocation(jobs: list[Job]) -> list[list[Job]]:
    """Split one session id's jobs into messages: one per user and invocation, in order of
    readiness. Two users' sessions may share an id (a session is the pair): one message never
    carries another user's response, even if the two name the same invocation id."""
    groups: dict[tuple[str | None, str | None], list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.user_id, job.invocation_id), []).append(job)
    return list(groups.values())


def response_of(job: Job) -> FunctionResponse:
    """The function response a job answers its call with: final, or progress while running."""
    assert job.call_id is not None
    body = final_response(job) if job.terminal else progress_response(job)
    return FunctionResponse(job.call_id, job.tool_name, body)


class Deliverer:
    """Claims ready jobs and delivers them through an :class:`AgentRunner`.

    It serves the jobs of ``runner.app_name`` alone (and those of no app, which its claim
    makes that app's): on a database several apps share, another app's jobs are left for
    that app's deliverer.
    """

    def __init__(
        self,
        jobs: Jobs,
        runner: AgentRunner,
        *,
        deliveries: int = 16,
        batch: int = 64,
        lease: str | float = "60s",
        max_attempts: int = 8,
        retry_base: str | float = "1s",
        retry_cap: str | float = "5m",
        poll_interval: str | float = "1s",
        holder: str | None = None,
        on_event: Callable[[Job, AgentEvent], None] | None = None,
    ) -> None:
        self.jobs = jobs
        self.runtime = jobs.runtime
        self.runner = runner
        self.app_name = runner.app_name
        self.deliveries = check_deliveries(deliveries)
        self.batch = batch
        self.lease = parse_duration(lease)
        self.max_attempts = max_attempts
        self.retry_base = parse_duration(retry_base)
        self.retry_cap = parse_duration(retry_cap)
        self.poll_interval = parse_duration(poll_interval)
        self.holder = holder or new_holder_id("deliverer")
        self.on_event = on_event
        self.stats: Counter[str] = Counter()
        self._stopping = False
        self._marks = _GroupCommit(self)
        # Sessions this holder claimed again while their delivery was still in flight, with
        # the fence of each such take: the delivery in hand releases them as it ends.
        self._claimed_again: dict[SessionKey, set[int | None]] = {}

    # -- one pass -----------------------------------------------------------------------

    async def run_once(self) -> int:
        """Claim what is ready and deliver it; return how many jobs were handled."""
        claimed = await self._claim(self.batch)
        if not claimed:
            return 0
        by_session = _by_session(claimed)
        await asyncio.gather(*(self._deliver_session(jobs) for jobs in by_session.values()))
        return len(claimed)

    async def _deliver_session(self, jobs: list[Job]) -> None:
        session = jobs[0].session_key
        heartbeat = _Heartbeat(self, jobs)
        released = False
        try:
            groups = group_by_invocation(jobs)
            for index, group in enumerate(groups):
                if self._stopping:
                    for rest in groups[index:]:
                        await self._give_back(rest)
                    break
                last = index == len(groups) - 1
                released = await self._deliver_group(session, group, release_after=last)
        except asyncio.CancelledError:
            if not heartbeat.lost:
                raise
            # Cut short by its own heartbeat, not by whoever runs the deliverer: that
            # cancel ends here. Jobs not yet delivered go back unless claimed again since.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await self._fenced_off(jobs)
        finally:
            await heartbeat.stop()
            if not released:
                await self._release(session, jobs[0].claim_fence)
            # Checked after every wait: a claim may land while any of them is pending.
            while fences := self._claimed_again.pop(session, None):
                for fence in fences:
                    await self._release(session, fence)

    async def _release(self, session: SessionKey, fence: int | None) -> None:
        """Release the session's lease if it is still the take made under ``fence``."""
        await self.runtime.in_thread(
            self.runtime.store.release_session, session, self.holder, fence=fence
        )

    async def _deliver_group(
        self, session: SessionKey, group: list[Job], *, release_after: bool
    ) -> bool:
        """Deliver one message; True when the session lease was released with the bookkeeping."""
        with self.runtime.telemetry.deliver(group):
            return await self._deliver_message(session, group, release_after=release_after)

    async def _deliver_message(
        self, session: SessionKey, group: list[Job], *, release_after: bool
    ) -> bool:
        store, runner = self.runtime.store, self.runner
        user_id, session_id = session.user_id, session.session_id
        to_send, already = [], []
        try:
            for job in group:
                assert job.call_id is not None
                if job.terminal and await runner.has_function_response(
                    user_id=user_id, session_id=session_id, call_id=job.call_id
                ):
                    # Delivered before a crash; only the bookkeeping was lost.
                    await self._mark_delivered([job])
                    self._count("already_in_session", [job])
                    already.append(job)
                    continue
                to_send.append(job)
        except Exception as exc:
            # The agent could not tell (an agent server that is down): retried like a failed
            # run, rather than left claimed until the claim runs out.
            await self._retry_later([j for j in group if j not in already], exc)
            return False
        if not to_send:
            return False
        message = Message(
            function_responses=tuple(response_of(j) for j in to_send),
            fence=self._fence(session, to_send[0]),
        )
        observer = CallObserver(
            self.jobs.joins, app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        turn = {APP_NAME: runner.app_name, USER_ID: user_id, SESSION_ID: session_id}
        try:
            with self.runtime.telemetry.span("longcall.agent_turn", turn):
                async for event in runner.run(
                    user_id=user_id, session_id=session_id, message=message
                ):
                    await observer.observe(event)
                    if self.on_event is not None:
                        self.on_event(to_send[0], event)
        except FenceLost as exc:
            # Another holder (or a user turn) has the session now: this delivery wrote
            # nothing after losing it, and its jobs are theirs, or ready again, to deliver.
            log.warning(
                "delivery to session %s stopped: %s", session, exc, extra=about(session=session)
            )
            self.runtime.telemetry.failed(exc)
            await self._fenced_off(to_send)
            return False
        except UnknownCallError as exc:
            if len(to_send) > 1:
                # The agent refused the whole message before storing any of it: send each
                # response alone, so only the job whose call is unknown is orphaned.
                released = False
                for index, job in enumerate(to_send):
                    last = release_after and index == len(to_send) - 1
                    released = await self._deliver_group(session, [job], release_after=last)
                return released
            log.error(
                "session %s has no call for jobs %s: %s",
                session,
                [j.job_id for j in to_send],
                exc,
                extra=about(to_send[0]),
            )
            self.runtime.telemetry.failed(exc)
            for job in to_send:
                await self.runtime.in_thread(
                    store.release,
                    job,
                    self.holder,
                    error=str(exc),
                    delay=0,
                    delivery=Delivery.ORPHANED,
                )
            self._count("orphaned", to_send)
            return False
        except Exception as exc:
            await self._retry_later(to_send, exc)
            return False
        await self._mark_delivered(to_send, release_session=session if release_after else None)
        self._count("delivered", [j for j in to_send if j.terminal])
        self._count("progress_delivered", [j for j in to_send if not j.terminal])
        return release_after

    async def _fenced_off(self, jobs: list[Job]) -> None:
        """After the fence was lost: give back what is still this claim's (the store refuses
        the rest), and count it."""
        await self._give_back(jobs)
        self._count("fence_lost", jobs)

    def _fence(self, session: SessionKey, job: Job) -> Fence | None:
        """The fence this delivery's claim was taken under, for the agent to check."""
        if job.claim_fence is None:
            return None
        return Fence(
            session,
            self.holder,
            job.claim_fence,
            functools.partial(
                self.runtime.store.holds_session, session, self.holder, job.claim_fence
            ),
        )

    def _count(self, outcome: str, jobs: list[Job]) -> None:
        """Tally a delivery outcome, and tell the app's listeners (the server's metrics)."""
        if not jobs:
            return
        self.stats[outcome] += len(jobs)
        self.runtime.telemetry.note(DELIVERY_OUTCOME, outcome)
        for listener in self.jobs.delivery_listeners:
            for job in jobs:
                listener(outcome, job)

    async def _mark_delivered(
        self, jobs: list[Job], *, release_session: SessionKey | None = None
    ) -> None:
        marked = await self._marks.mark(jobs, release_session)
        if marked < len(jobs):
            log.warning(
                "lost the claim on %d of jobs %s before marking them delivered",
                len(jobs) - marked,
                [j.job_id for j in jobs],
                extra=about(jobs[0]),
            )
            self.stats["claim_lost"] += len(jobs) - marked

    async def _retry_later(self, jobs: list[Job], exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.runtime.telemetry.failed(exc)
        for job in jobs:
            if job.attempts >= self.max_attempts:
                log.error(
                    "giving up delivering job %s after %d attempts: %s",
                    job.job_id,
                    job.attempts,
                    error,
                    extra=about(job),
                )
                delivery, delay = Delivery.FAILED, 0.0
                self._count("delivery_failed", [job])
            else:
                delivery, delay = Delivery.READY, self.backoff(job.attempts)
                log.warning(
                    "delivery of job %s failed (attempt %d), retrying in %.1fs: %s",
                    job.job_id,
                    job.attempts,
                    delay,
                    error,
                    extra=about(job),
                )
                self._count("delivery_retried", [job])
            await self.runtime.in_thread(
                self.runtime.store.release,
                job,
                self.holder,
                error=error,
                delay=delay,
                delivery=delivery,
            )

    async def _give_back(self, jobs: list[Job]) -> None:
        for job in jobs:
            await self.runtime.in_thread(
                self.runtime.store.release,
                job,
                self.holder,
                error=None,
                delay=0,
                delivery=Delivery.READY,
            )

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: about base, 2·base, 4·base … up to the cap."""
        return exponential(attempt, base=self.retry_base, cap=self.retry_cap)

    # -- the loop -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set, up to ``deliveries`` sessions at once; wakes on
        commits in this process, on PostgreSQL's notifications from others, as a delivery
        frees its slot, and otherwise polls every ``poll_interval``. Once stopped it waits
        for the deliveries in flight (each finishes its message in hand and gives the rest
        back), so a cancel of this task is what cuts them short."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def ready() -> None:
            loop.call_soon_threadsafe(wake.set)

        in_flight: dict[SessionKey, asyncio.Task[None]] = {}
        self.runtime.store.ready_listeners.append(ready)
        listener_stop = threading.Event()
        listener = listen_in_thread(self.runtime.store, NOTIFY_CHANNEL, ready, listener_stop)
        try:
            while not stop.is_set() and not self._stopping:
                wake.clear()
                free = self.deliveries - len(in_flight)
                if free <= 0:
                    await wait_any(stop, wake, self.poll_interval)
                    continue
                try:
                    claimed = await self._claim(min(self.batch, free))
                    started = await self._start(claimed, in_flight, wake)
                except Exception:
                    log.exception("deliverer pass failed; retrying")
                    await wait_any(stop, None, self.poll_interval)
                    continue
                # Only what was claimed but given back (its session still being delivered
                # to) waits: for that delivery to end (its slot wakes the loop) or the poll.
                if started or stop.is_set():
                    continue
                await wait_any(stop, wake, self.poll_interval)
            if in_flight:
                await asyncio.wait(list(in_flight.values()))
        finally:
            cut_short = list(in_flight.values())
            for task in cut_short:
                task.cancel()
            await asyncio.gather(*cut_short, return_exceptions=True)
            self.runtime.store.ready_listeners.remove(ready)
            listener_stop.set()
            if listener is not None:
                await asyncio.to_thread(listener.join, 5)

    async def _claim(self, limit: int) -> list[Job]:
        return await self.runtime.in_thread(
            self.runtime.store.claim,
            self.holder,
            limit=limit,
            lease=self.lease,
            app_name=self.app_name,
        )

    async def _start(
        self,
        claimed: list[Job],
        in_flight: dict[SessionKey, asyncio.Task[None]],
        wake: asyncio.Event,
    ) -> int:
        """Start one delivery task per claimed session, each freeing its slot (and waking
        the loop) as it ends; return how many started."""
        started = 0
        for session, jobs in _by_session(claimed).items():
            running = in_flight.get(session)
            if running is not None and not running.done():
                # The session's lease was free, so this holder could claim it again: the
                # delivery in hand released it with its last commit and has not ended yet,
                # or its lease ran out under it. Two deliveries into one session must never
                # run at once, so these jobs go back, and the delivery in hand releases the
                # lease this claim took as it ends (else it would sit until it runs out).
                log.info(
                    "session %s was claimed again while its delivery is still running; "
                    "giving back jobs %s",
                    session,
                    [j.job_id for j in jobs],
                    extra=about(session=session),
                )
                # Given back under this claim's lease first: the delivery in hand releases
                # only the takes it is told of, and only once told.
                await self._give_back(jobs)
                if running.done():
                    await self._release(session, jobs[0].claim_fence)
                else:
                    self._claimed_again.setdefault(session, set()).add(jobs[0].claim_fence)
                continue
            task = asyncio.create_task(self._deliver_session(jobs), name=f"deliver {session}")
            in_flight[session] = task
            started += 1

            def done(task: asyncio.Task[None], session: SessionKey = session) -> None:
                if in_flight.get(session) is task:
                    del in_flight[session]
                wake.set()
                if not task.cancelled() and task.exception() is not None:
                    log.error(
                        "delivery to session %s failed",
                        session,
                        exc_info=task.exception(),
                        extra=about(session=session),
                    )

            task.add_done_callback(done)
        return started

    def stop_soon(self) -> None:
        """Finish the group in hand, give the rest back, and let :meth:`run` return."""
        self._stopping = True


def _by_session(jobs: list[Job]) -> dict[SessionKey, list[Job]]:
    """Claimed jobs per session (app, user and session id), each session's in the order of
    the claim (readiness)."""
    by_session: dict[SessionKey, list[Job]] = {}
    for job in jobs:
        by_session.setdefault(job.session_key, []).append(job)
    return by_session


class _GroupCommit:
    """Marks deliveries that finish at about the same time in one commit.

    Sessions are delivered concurrently; each waits for its own bookkeeping to commit before
    it goes on, but whatever is queued while a commit runs shares the next one.
    """

    def __init__(self, deliverer: Deliverer) -> None:
        self._deliverer = deliverer
        self._queue: list[tuple[list[Job], SessionKey | None, asyncio.Future[int]]] = []
        self._flushing = False

    async def mark(self, jobs: list[Job], release_session: SessionKey | None) -> int:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((jobs, release_session, future))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        deliverer = self._deliverer
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    counts = await deliverer.runtime.in_thread(
                        deliverer.runtime.store.mark_delivered_batch,
                        [(jobs, release) for jobs, release, _ in batch],
                        deliverer.holder,
                        throttle=deliverer.runtime.progress_throttle,
                    )
                except Exception as exc:
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, _, future), count in zip(batch, counts, strict=True):
                    if not future.done():
                        future.set_result(count)
        finally:
            self._flushing = False


class _Heartbeat:
    """Renews a session's claims every third of the lease while its delivery runs, and cuts
    the delivery short once they are lost: a holder that lost its claim must not go on
    writing into the session (the agent's own fence check is the last line; this is the
    first).

    A timer rather than a task: most deliveries end long before the first beat.
    """

    def __init__(self, deliverer: Deliverer, jobs: list[Job]) -> None:
        self._deliverer = deliverer
        self._jobs = jobs
        self._loop = asyncio.get_running_loop()
        self._delivery = asyncio.current_task()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.lost = False
        self._handle = self._loop.call_later(deliverer.lease / 3, self._beat)

    def _beat(self) -> None:
        self._task = self._loop.create_task(self._renew())

    async def _renew(self) -> None:
        deliverer = self._deliverer
        try:
            kept = await deliverer.runtime.in_thread(
                deliverer.runtime.store.renew, deliverer.holder, self._jobs, lease=deliverer.lease
            )
        except Exception:
            log.exception("could not renew leases; another deliverer may take over")
        else:
            if not kept and not self._stopped:
                log.error(
                    "lost the lease on session %s (fence %s): this delivery outlived it, so it "
                    "stops here and writes nothing more",
                    self._jobs[0].session_id,
                    self._jobs[0].claim_fence,
                )
                self.lost = True
                if self._delivery is not None:
                    self._delivery.cancel()
                return
        if not self._stopped:
            self._handle = self._loop.call_later(deliverer.lease / 3, self._beat)

    async def stop(self) -> None:
        self._stopped = True
        self._handle.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
