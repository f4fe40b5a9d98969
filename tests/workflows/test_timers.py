"""Durable timers: ``ctx.sleep`` and ``ctx.wait_until`` suspend a run until a wake-up time on
the database's clock (a FakeClock here), and any worker resumes it once; on SQLite and
PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from longcall import App, RunStatus
from longcall.core.clock import FakeClock
from longcall.store.runs import due_in
from longcall.workflows import TaskContext

from .run_threads import worker_running
from .timer_procs import build_app, read_effects

DAY = 86_400.0


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    with App(db_url, clock=clock, run_lease="2s") as app:
        yield app


def wait_for(app: App, run_id: str, status: RunStatus, seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        run = app.store.get_run(run_id)
        if run.status is status:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.01)


def test_a_run_sleeps_days_and_wakes_once_when_due(app: App, clock: FakeClock) -> None:
    calls: list[str] = []

    @app.task
    def step(name: str) -> str:
        calls.append(name)
        return name

    @app.workflow
    def napper(ctx: TaskContext) -> list[str]:
        first = step("before")
        ctx.sleep("3d")
        return [first, step("after")]

    started = clock.now()
    run = app.submit_run(napper)
    with worker_running(app):
        asleep = wait_for(app, run.run_id, RunStatus.SLEEPING)
        assert asleep.wake_at == started + 3 * DAY
        assert asleep.holder is None and asleep.finished_at is None
        backlog = app.monitor.run_backlog()
        assert backlog.counts["sleeping"] == 1 and backlog.counts["queued"] == 0
        assert backlog.oldest_queued_at is None  # not queued work: no age to report
        listed = app.list_runs(status=RunStatus.SLEEPING)
        assert [r.run_id for r in listed] == [run.run_id]
        assert app.list_runs(status=RunStatus.QUEUED) == []

        clock.advance(3 * DAY - 1)
        time.sleep(0.2)  # a few polls: not due yet
        assert app.store.get_run(run.run_id).status is RunStatus.SLEEPING
        clock.advance(1)
        done = wait_for(app, run.run_id, RunStatus.COMPLETED)
    assert done.result == ["before", "after"]
    assert calls == ["before", "after"]  # the task before the sleep ran once
    assert done.executions == 2 and done.wake_at is None


def test_a_replay_keeps_the_recorded_wake_up_time(app: App, clock: FakeClock) -> None:
    """Taken early (continue_run), the run sleeps again until the same time, not 1h from now;
    a deadline computed from the time of day does not move on replay either."""

    @app.workflow
    def until_noon(ctx: TaskContext) -> str:
        ctx.wait_until(datetime.fromtimestamp(clock.now(), UTC) + timedelta(hours=1))
        return "woke"

    run = app.run_workflow(until_noon)
    assert run.status is RunStatus.SLEEPING
    wake_at = run.wake_at
    assert wake_at == clock.now() + 3600
    clock.advance(1800)
    again = app.continue_run(run.run_id)
    assert again.status is RunStatus.SLEEPING and again.wake_at == wake_at
    clock.advance(1800)
    assert app.continue_run(run.run_id).result == "woke"


def test_a_sleep_already_past_does_not_sleep(app: App, clock: FakeClock) -> None:
    @app.workflow
    def past(ctx: TaskContext) -> int:
        ctx.wait_until(datetime.fromtimestamp(clock.now() - 60, UTC))
        ctx.sleep(0)
        return 1

    # Both wake-up times are not after now: the run goes on, with both recorded.
    run = app.run_workflow(past)
    assert run.status is RunStatus.COMPLETED and run.result == 1
    steps = app.get_run(run.run_id).steps
    assert [s.name for s in steps] == ["longcall.wait_until", "longcall.sleep"]


def test_a_claim_ahead_takes_a_run_due_soon_and_says_when(app: App, clock: FakeClock) -> None:
    """``claim_runs(ahead=...)`` takes a run that wakes within that long, its ``updated_at``
    its wake-up time (which the engine compares the sleep with) and ``due_in`` how long after
    the claim that is; a plain claim, or one not far enough ahead, leaves it asleep."""

    @app.workflow
    def nap(ctx: TaskContext) -> str:
        ctx.sleep(30)
        return "woke"

    run = app.run_workflow(nap)
    assert run.status is RunStatus.SLEEPING and run.wake_at == clock.now() + 30
    clock.advance(29.5)
    assert app.store.claim_runs("w/1", limit=5, lease=60) == []
    assert app.store.claim_runs("w/1", limit=5, lease=60, ahead=0.4) == []
    [(taken, _, _)] = app.store.claim_runs("w/1", limit=5, lease=60, ahead=1.0)
    assert taken.run_id == run.run_id and taken.updated_at == run.wake_at
    assert due_in(taken, 60) == pytest.approx(0.5)
    # A run due already is claimed as before: due at once.
    again = app.submit_run(nap)
    [(now_due, _, _)] = app.store.claim_runs("w/2", limit=5, lease=60, ahead=1.0)
    assert now_due.run_id == again.run_id and due_in(now_due, 60) == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_run_claimed_ahead_starts_when_due_not_before(db_url: str, kind: str) -> None:
    """On the real clock, a worker claiming 2 s ahead takes the run as soon as it sleeps
    (the 20 ms poll), 1.5 s before it is due, and starts it when it is due: the code after
    the sleep runs at its wake-up time or later (the database's clock and this one are the
    same machine's; 5 ms of leeway for their rounding), within 1 s (a safety net)."""
    with App(db_url, run_lease="5s") as app:
        seen: dict[str, float] = {}

        def after(ctx: TaskContext) -> str:
            seen["ran"] = time.time()
            seen["claimed"] = app.store.get_run(ctx.run_id).updated_at
            return "woke"

        if kind == "sync":

            @app.workflow("nap")
            def nap(ctx: TaskContext) -> str:
                ctx.sleep(1.5)
                return after(ctx)

        else:

            @app.workflow("nap")
            async def nap_async(ctx: TaskContext) -> str:
                await ctx.sleep_async(1.5)
                return after(ctx)

        run = app.submit_run("nap")
        with worker_running(app, wake_ahead="2s"):
            done = wait_for(app, run.run_id, RunStatus.COMPLETED, seconds=20)
        wake_at = app.get_run(run.run_id).steps[0].result["wake_at"]
        assert done.result == "woke" and done.executions == 2
        # Claimed ahead: the claim recorded the wake-up time as the start, not its own time.
        assert seen["claimed"] == wake_at
        assert -0.005 <= seen["ran"] - wake_at < 1.0, seen["ran"] - wake_at


def test_an_async_workflow_awaits_its_sleep(app: App, clock: FakeClock) -> None:
    @app.workflow
    async def nap(ctx: TaskContext) -> str:
        await ctx.sleep("2h")
        await ctx.sleep_async(60)
        return "rested"

    run = app.run_workflow(nap)
    assert run.status is RunStatus.SLEEPING and run.wake_at == clock.now() + 7200
    clock.advance(7200)
    second = app.continue_run(run.run_id)
    assert second.status is RunStatus.SLEEPING and second.wake_at == clock.now() + 60
    clock.advance(60)
    assert app.continue_run(run.run_id).result == "rested"


def test_cancel_ends_a_sleeping_run_at_once(app: App, clock: FakeClock) -> None:
    @app.workflow
    def long_nap(ctx: TaskContext) -> None:
        ctx.sleep("30d")

    run = app.run_workflow(long_nap)
    cancelled = app.cancel_run(run.run_id)
    assert cancelled.status is RunStatus.CANCELLED and cancelled.finished_at is not None
    clock.advance(31 * DAY)
    with worker_running(app):
        time.sleep(0.2)
    assert app.store.get_run(run.run_id).status is RunStatus.CANCELLED


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ctx: ctx.sleep("soon"), "not a duration"),
        (lambda ctx: ctx.sleep(-1), "negative"),
        (lambda ctx: ctx.sleep(None), "takes seconds"),
        (lambda ctx: ctx.wait_until(datetime(2030, 1, 1)), "timezone-aware"),
        (lambda ctx: ctx.wait_until("2030-01-01"), "takes a datetime"),
    ],
)
def test_bad_sleeps_fail_the_run_clearly(app: App, call: Any, message: str) -> None:
    @app.workflow("bad")
    def bad(ctx: TaskContext) -> None:
        call(ctx)

    run = app.run_workflow(bad)
    assert run.status is RunStatus.FAILED
    assert message in run.error["message"]
    assert app.get_run(run.run_id).steps == []  # nothing recorded


def test_a_task_cannot_sleep(app: App) -> None:
    @app.task
    def sleepy(ctx: TaskContext) -> None:
        ctx.sleep(1)

    @app.workflow
    def body() -> None:
        sleepy()

    run = app.run_workflow(body)
    assert run.status is RunStatus.FAILED
    assert "belongs in the workflow body" in run.error["message"]


def test_many_sleeping_runs_hold_no_worker(app: App, clock: FakeClock) -> None:
    """2,000 runs asleep: the worker holds none of them (no thread, no lease), and once due
    each wakes exactly once."""
    woke: list[int] = []

    @app.task
    def wake(n: int) -> None:
        woke.append(n)

    @app.workflow
    def sleeper(n: int, ctx: TaskContext) -> int:
        ctx.sleep("1h")
        wake(n)
        return n

    count = 2000
    runs = [app.submit_run(sleeper, i) for i in range(count)]
    with worker_running(app, concurrency=8):
        deadline = time.monotonic() + 120
        while app.monitor.run_backlog().counts["sleeping"] < count:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        backlog = app.monitor.run_backlog()
        assert backlog.counts["running"] == 0 and backlog.counts["queued"] == 0
        threads = threading.active_count()
        time.sleep(0.3)
        assert threading.active_count() <= threads  # asleep, nothing started for them
        clock.advance(3600)
        while app.monitor.run_backlog().counts["sleeping"] or len(woke) < count:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        while any(not app.store.get_run(r.run_id).status.terminal for r in runs[-5:]):
            time.sleep(0.05)
    assert sorted(woke) == list(range(count))  # each once


# -- across processes -------------------------------------------------------------------------

SCRIPT = Path(__file__).resolve().with_name("timer_procs.py")


def spawn_worker(url: str, tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), "--url", url, "--effects", str(tmp_path / "fx.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)


@pytest.mark.slow
def test_a_sleep_survives_a_worker_killed_and_wakes_once_on_time(
    db_url: str, tmp_path: Path
) -> None:
    """Worker A puts the run to sleep and is SIGKILLed; worker B, started afterwards, wakes
    it once, within 1.5 s of its wake-up time (B polls every second)."""
    effects = tmp_path / "fx.log"
    with build_app(db_url, effects) as app:
        run = app.submit_run("napper", 4.0)
        first = spawn_worker(db_url, tmp_path, "a")
        try:
            asleep = wait_for(app, run.run_id, RunStatus.SLEEPING, seconds=30)
        finally:
            kill(first)
        second = spawn_worker(db_url, tmp_path, "b")
        try:
            done = wait_for(app, run.run_id, RunStatus.COMPLETED, seconds=30)
        finally:
            kill(second)
    lines = read_effects(effects)
    assert [(what, pid) for what, pid, _ in lines] == [
        ("before", first.pid),
        ("after", second.pid),
    ]
    assert asleep.wake_at is not None
    late = done.result - asleep.wake_at
    assert 0 <= late < 1.5, late
