"""The worker's loops: a graceful stop, the outbox's re-dispatch, ``on_cancel`` hooks.

The graceful stop runs a real worker process (``tests/procs.py --mode worker``) and sends it
SIGTERM; the dispatcher tests drive :class:`~longcall.jobs.dispatcher.Dispatcher` passes in
process with a :class:`~longcall.testing.FakeClock`, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from longcall import App, CallIds, Delivery, JobHandle, JobState, Rule, ScriptedAgent
from longcall.jobs.dispatcher import Dispatcher
from longcall.store import NewJob
from longcall.testing import FakeClock
from procs import (
    Proc,
    build_app,
    final_responses,
    leftovers,
    log_kind,
    procs,
    read_log,
    seed,
    sql_rows,
    stats_of,
    tracebacks,
    wait_for,
)


def outbox(url: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in sql_rows(url, "SELECT job_id, kind FROM lc_outbox")]


def kinds(app: App, job_id: str) -> Counter[str]:
    return Counter(e.kind for e in app.job_events(job_id))


# -- SIGTERM -----------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_finishes_the_delivery_in_hand_and_leaves_nothing_claimed(
    db_url: str, tmp_path: Path
) -> None:
    """SIGTERM: the delivery in hand finishes, the rest is given back, the process exits 0."""
    app, agent = build_app(db_url)
    try:
        # Session s000 gets two invocations (two messages), s001 one.
        asyncio.run(seed(app, agent, sessions=2, turns=1, text="one report"))
        asyncio.run(app.run_turn_async(agent, user_id="u", session_id="s000", text="one report"))
        for job in app.list_jobs(state=JobState.STARTED):
            assert app.complete(job.job_id, {"pages": 1}).changed
        log, paused = tmp_path / "worker.log", tmp_path / "paused"
        pause = 1.5
        with procs([]) as started:
            worker = Proc(
                db_url,
                log,
                "--mode", "worker",
                "--pause-at", "before",
                "--pause", str(pause),
                "--signal-file", str(paused),
            )  # fmt: skip
            started.append(worker)
            wait_for(paused.exists, 60, "the worker to start delivering")
            wait_for(lambda: len(log_kind(read_log(log), "paused")) == 2, 10, "both sessions")
            sent = time.monotonic()
            worker.signal(signal.SIGTERM)
            code = worker.wait(pause + 10)
            took = time.monotonic() - sent
        assert code == 0, worker.stderr()
        assert tracebacks(worker.stderr()) == []
        assert took < pause + 5

        lines = read_log(log)
        delivered = Counter(ln[2] for ln in log_kind(lines, "delivered"))
        assert delivered == Counter({"s000": 1, "s001": 1})
        (stats,) = stats_of(lines).values()
        assert stats["delivered"] == 2
        jobs = app.list_jobs()
        assert Counter(j.delivery for j in jobs) == Counter(
            {Delivery.DELIVERED: 2, Delivery.READY: 1}
        )
        (rest,) = [j for j in jobs if j.delivery is Delivery.READY]
        assert rest.session_id == "s000"
        assert rest.claim_holder is None
        assert leftovers(db_url) == ([], [])

        # Given back, not left to a lease: the next resumer takes it at once.
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        assert final_responses(app) == Counter(dict.fromkeys((j.call_id for j in jobs), 1))
    finally:
        app.close()


@pytest.mark.slow
def test_delivery_outlasting_the_drain_timeout_is_left_to_the_lease(
    db_url: str, tmp_path: Path
) -> None:
    """A delivery still running at the drain timeout is cancelled; the lease hands it on."""
    app, agent = build_app(db_url)
    try:
        (job_id,) = asyncio.run(seed(app, agent, sessions=1, turns=1, text="one report"))
        log, paused, stop = tmp_path / "worker.log", tmp_path / "paused", tmp_path / "stop"
        with procs([]) as started:
            stuck = Proc(
                db_url,
                log,
                "--mode", "worker",
                "--lease", "2",
                "--drain", "0.5",
                "--pause-at", "before",
                "--signal-file", str(paused),
            )  # fmt: skip
            started.append(stuck)
            wait_for(paused.exists, 60, "the worker to start delivering")
            sent = time.monotonic()
            stuck.signal(signal.SIGTERM)
            assert stuck.wait(10) == 0, stuck.stderr()
            assert time.monotonic() - sent < 5
            assert tracebacks(stuck.stderr()) == []
            job = app.get_job(job_id)
            assert job.delivery is Delivery.READY
            assert job.claim_holder is not None  # still claimed: only the lease frees it
            assert leftovers(db_url)[0] == []  # but the session is free for user turns
            nxt = Proc(db_url, log, "--mode", "worker", "--lease", "2", "--stop-file", str(stop))
            started.append(nxt)
            wait_for(lambda: app.get_job(job_id).delivery is Delivery.DELIVERED, 60, "takeover")
            stop.touch()
            assert nxt.wait(30) == 0, nxt.stderr()
        lines = read_log(log)
        assert len(log_kind(lines, "attempt")) == 2
        assert len(log_kind(lines, "delivered")) == 1
        assert final_responses(app) == Counter({app.get_job(job_id).call_id: 1})
        assert leftovers(db_url) == ([], [])
    finally:
        app.close()


# -- the outbox: a submission lost to a crash --------------------------------------------


def test_dispatcher_resubmits_a_lost_submission_once(db_url: str) -> None:
    """A creator that crashed before submitting: the dispatcher submits once, as attempt 2."""
    clock = FakeClock()
    submitted: list[tuple[str, int, str]] = []
    with App(db_url, clock=clock) as app:

        @app.long_running(name="export")
        def export(fmt: str, job: JobHandle) -> str:
            """Exports data."""
            submitted.append((job.id, job.attempt, fmt))
            return "Export queued."

        new = NewJob("job-1", "export", {"fmt": "csv"}, CallIds(), deadline=None)
        _, created = app.store.create_job(new, holder="crashed-creator", dispatch_lease=30)
        assert created
        first, second = Dispatcher(app.jobs), Dispatcher(app.jobs)

        async def scenario() -> None:
            # The creator's hold is still live: nobody re-submits yet.
            assert await first.run_once() == 0
            clock.advance(31)
            handled = await asyncio.gather(first.run_once(), second.run_once())
            assert sorted(handled) == [0, 1]
            clock.advance(3600)
            assert await asyncio.gather(first.run_once(), second.run_once()) == [0, 0]

        asyncio.run(scenario())
        assert submitted == [("job-1", 2, "csv")]
        assert app.get_job("job-1").pending_message == "Export queued."
        assert app.get_job("job-1").state is JobState.STARTED
        assert outbox(db_url) == []


def test_lost_submission_of_a_finished_job_is_dropped(db_url: str) -> None:
    """A lost submission whose job already has its result is dropped without running the body."""
    clock = FakeClock()
    submitted: list[str] = []
    with App(db_url, clock=clock) as app:

        @app.long_running(name="export")
        def export(fmt: str) -> str:
            """Exports data."""
            submitted.append(fmt)
            return "Export queued."

        new = NewJob("job-1", "export", {"fmt": "csv"}, CallIds(), deadline=None)
        app.store.create_job(new, holder="crashed-creator", dispatch_lease=30)
        assert app.complete("job-1", {"rows": 1}).changed
        clock.advance(31)
        assert asyncio.run(Dispatcher(app.jobs).run_once()) == 1
        assert submitted == []
        assert outbox(db_url) == []
        assert app.get_job("job-1").state is JobState.SUCCEEDED


class Crash(BaseException):
    """Stands in for the process dying: no ``except Exception`` in longcall catches it."""


def test_dispatch_that_keeps_failing_fails_the_job_and_the_agent_hears(db_url: str) -> None:
    """A re-dispatch failing max_attempts times fails the job, and the agent is told so."""
    clock = FakeClock()
    tries: list[int] = []
    with App(db_url, clock=clock, dispatch_lease="30s") as app:

        @app.long_running(name="export")
        async def export(fmt: str, job: JobHandle) -> str:
            """Exports data."""
            tries.append(job.attempt)
            if job.attempt == 1:
                raise Crash  # the process died after the job row committed
            raise RuntimeError("queue unavailable")

        agent = ScriptedAgent(app, rules=[Rule("export", calls=[("export", {"fmt": "csv"})])])
        with pytest.raises(Crash):
            app.run_turn(agent, user_id="u", session_id="s1", text="export please")
        (job,) = app.list_jobs()
        assert job.state is JobState.STARTED
        assert job.call_id is not None
        assert outbox(db_url) == [(job.job_id, "dispatch")]

        dispatcher = Dispatcher(app.jobs, max_attempts=3)

        async def scenario() -> None:
            clock.advance(31)
            for attempt in (1, 2, 3):
                assert await dispatcher.run_once() == 1
                assert await dispatcher.run_once() == 0  # backing off
                clock.advance(2.0**attempt + 0.01)
            assert await dispatcher.run_once() == 0
            assert await app.deliverer(agent).run_once() == 1

        asyncio.run(scenario())
        assert tries == [1, 2, 3, 4]
        failed = app.get_job(job.job_id)
        assert failed.state is JobState.FAILED
        assert "queue unavailable" in failed.result["error"]
        assert failed.delivery is Delivery.DELIVERED
        assert kinds(app, job.job_id) == Counter(
            {"dispatch_error": 2, "dispatch_abandoned": 1, "failed": 1}
        )
        assert outbox(db_url) == []
        assert final_responses(app) == Counter({job.call_id: 1})
        history = asyncio.run(agent.history("s1"))
        assert history[-1].text is not None and "export failed" in history[-1].text


# -- on_cancel ---------------------------------------------------------------------------


def test_on_cancel_runs_once_on_expiry_and_once_on_cancel(db_url: str) -> None:
    """The tool's on_cancel hook runs once for an expired job and once for a cancelled one."""
    clock = FakeClock()
    hooked: list[str] = []
    with App(db_url, clock=clock) as app:

        def hook(job: JobHandle) -> None:
            hooked.append(job.id)

        @app.long_running(name="export", deadline="10m", on_cancel=hook)
        def export(fmt: str) -> str:
            """Exports data."""
            return "Export queued."

        late = export(fmt="csv")["jobId"]
        dropped = export(fmt="xml")["jobId"]
        clock.advance(5 * 60)
        assert app.cancel(dropped, "not needed").changed
        clock.advance(6 * 60)
        assert [j.job_id for j in app.sweeper().sweep()] == [late]
        dispatcher = Dispatcher(app.jobs)

        async def drain() -> int:
            total = 0
            while handled := await dispatcher.run_once():
                total += handled
            return total

        assert asyncio.run(drain()) == 2
        assert sorted(hooked) == sorted([late, dropped])
        # Repeats change nothing and queue no second hook call.
        assert not app.cancel(late).changed
        assert not app.cancel(dropped).changed
        clock.advance(3600)
        assert app.sweeper().sweep() == []
        assert asyncio.run(drain()) == 0
        assert sorted(hooked) == sorted([late, dropped])
        assert app.get_job(late).state is JobState.EXPIRED
        assert app.get_job(dropped).state is JobState.CANCELLED
        assert outbox(db_url) == []


def test_failing_on_cancel_hook_is_retried_and_recorded(db_url: str) -> None:
    """An on_cancel hook that raises is retried with backoff; each failure is a job event."""
    clock = FakeClock()
    calls: list[int] = []

    async def hook(job: JobHandle) -> None:
        calls.append(job.attempt)
        if len(calls) < 3:
            raise RuntimeError("cancel API down")

    with App(db_url, clock=clock) as app:

        @app.long_running(name="export", on_cancel=hook)
        def export(fmt: str) -> str:
            """Exports data."""
            return "Export queued."

        job_id = export(fmt="csv")["jobId"]
        assert app.cancel(job_id).changed
        dispatcher = Dispatcher(app.jobs)

        async def scenario() -> None:
            for attempt in (1, 2):
                assert await dispatcher.run_once() == 1  # raises inside, retried later
                assert await dispatcher.run_once() == 0
                clock.advance(2.0**attempt + 0.01)
            assert await dispatcher.run_once() == 1  # succeeds
            clock.advance(3600)
            assert await dispatcher.run_once() == 0

        asyncio.run(scenario())
        assert calls == [1, 2, 3]
        errors = [e for e in app.job_events(job_id) if e.kind == "cancel_error"]
        assert [e.data["attempt"] for e in errors] == [1, 2]
        assert all("cancel API down" in e.data["error"] for e in errors)
        assert outbox(db_url) == []


def test_on_cancel_hook_that_always_fails_is_given_up_visibly(db_url: str) -> None:
    """A hook that never succeeds is called max_attempts times, then recorded as abandoned."""
    clock = FakeClock()
    calls: list[str] = []

    def hook(job: JobHandle) -> None:
        calls.append(job.id)
        raise RuntimeError("cancel API gone")

    with App(db_url, clock=clock) as app:

        @app.long_running(name="export", on_cancel=hook)
        def export(fmt: str) -> str:
            """Exports data."""
            return "Export queued."

        job_id = export(fmt="csv")["jobId"]
        assert app.cancel(job_id).changed
        dispatcher = Dispatcher(app.jobs, max_attempts=3)

        async def scenario() -> None:
            for _ in range(10):
                await dispatcher.run_once()
                clock.advance(301)

        asyncio.run(scenario())
        assert calls == [job_id] * 3
        assert kinds(app, job_id) == Counter(
            {"cancelled": 1, "cancel_error": 2, "cancel_abandoned": 1}
        )
        assert app.get_job(job_id).state is JobState.CANCELLED
        assert outbox(db_url) == []


def test_sync_on_cancel_hook_runs_off_the_event_loop(db_url: str) -> None:
    """A slow sync on_cancel hook runs on a thread, so the worker's loop keeps running."""
    clock = FakeClock()
    on_loop: list[bool] = []

    def hook(job: JobHandle) -> None:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        time.sleep(0.5)  # a slow cancel request to the outside

    with App(db_url, clock=clock) as app:

        @app.long_running(name="export", on_cancel=hook)
        def export(fmt: str) -> str:
            """Exports data."""
            return "Export queued."

        assert app.cancel(export(fmt="csv")["jobId"]).changed
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async def scenario() -> int:
            ticker = asyncio.create_task(tick())
            try:
                return await Dispatcher(app.jobs).run_once()
            finally:
                ticker.cancel()

        assert asyncio.run(scenario()) == 1
        assert on_loop == [False]
        assert ticks >= 10


def test_a_loop_that_dies_stops_the_worker_at_once(db_url: str) -> None:
    """A worker loop that dies of an unhandled error is not left dead behind a live worker:
    the other loops are cancelled, the worker's heartbeat row goes, and run() raises it."""
    app = App(db_url)
    agent = ScriptedAgent(app, rules=[])
    worker = app.worker(agent, poll_interval="0.05s", sweep_interval="0.05s")

    async def broken(stop: asyncio.Event) -> None:
        await asyncio.sleep(0.2)
        raise RuntimeError("the dispatcher broke")

    worker.dispatcher.run = broken  # type: ignore[method-assign]

    async def scenario() -> float:
        started = time.monotonic()
        with pytest.raises(ExceptionGroup) as raised:
            await asyncio.wait_for(worker.run(handle_signals=False), 30)
        assert [str(e) for e in raised.value.exceptions] == ["the dispatcher broke"]
        return time.monotonic() - started

    try:
        took = asyncio.run(scenario())
        assert took < 10, f"the worker went on for {took:.1f} s with a dead loop"
        assert app.store.live_workers() == []
    finally:
        app.close()
