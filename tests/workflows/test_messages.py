"""Messages to runs (``app.send`` → ``ctx.recv``) and values runs publish (``ctx.set_event`` →
``app.get_event``); on SQLite and PostgreSQL, with a FakeClock for timeouts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longcall import App, RunStatus
from longcall.core.clock import FakeClock
from longcall.errors import InvalidValue, RunNotFound, RunStateError
from longcall.workflows import TaskContext

from .test_timers import kill, spawn_worker, wait_for, worker_running
from .timer_procs import build_app


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    with App(db_url, clock=clock, run_lease="2s") as app:
        yield app


def inbox(app: App) -> Any:
    @app.workflow
    def inbox(count: int, ctx: TaskContext) -> list[Any]:
        return [ctx.recv("orders") for _ in range(count)]

    return inbox


def test_messages_sent_before_the_run_waits_are_received_in_order(app: App) -> None:
    run = app.submit_run(inbox(app), 3)  # queued: nothing executes it yet
    for n in range(3):
        sent = app.send(run.run_id, "orders", {"n": n})
        assert sent.created and sent.seq == n + 1
    app.send(run.run_id, "other-topic", "not for recv('orders')")
    done = app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.result == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_run_waiting_in_recv_is_woken_by_a_send(app: App) -> None:
    run = app.submit_run(inbox(app), 2)
    with worker_running(app):
        waiting = wait_for(app, run.run_id, RunStatus.SLEEPING)
        assert waiting.recv_topic == "orders" and waiting.wake_at is None
        assert app.monitor.run_backlog().counts["queued"] == 0
        app.send(run.run_id, "orders", "first")
        wait_for(app, run.run_id, RunStatus.SLEEPING)  # again, for the second
        time.sleep(0.1)
        app.send(run.run_id, "orders", "second")
        done = wait_for(app, run.run_id, RunStatus.COMPLETED)
    assert done.result == ["first", "second"]


def test_one_idempotency_key_is_received_once(app: App) -> None:
    run = app.submit_run(inbox(app), 2)
    first = app.send(run.run_id, "orders", "pay", idempotency_key="k1")
    again = app.send(run.run_id, "orders", "pay", idempotency_key="k1")
    assert first.created and not again.created and again.seq == first.seq
    app.send(run.run_id, "orders", "ship", idempotency_key="k2")
    assert app.continue_run(run.run_id).result == ["pay", "ship"]


def test_a_received_message_is_not_received_again_on_replay(app: App, clock: FakeClock) -> None:
    @app.workflow
    def two_steps(ctx: TaskContext) -> list[Any]:
        first = ctx.recv("t")
        ctx.sleep(60)
        return [first, ctx.recv("t")]

    run = app.submit_run(two_steps)
    app.send(run.run_id, "t", 1)
    app.send(run.run_id, "t", 2)
    assert app.continue_run(run.run_id).status is RunStatus.SLEEPING
    clock.advance(60)
    assert app.continue_run(run.run_id).result == [1, 2]


def test_recv_times_out_with_none_and_replays_none(app: App, clock: FakeClock) -> None:
    @app.workflow
    def impatient(ctx: TaskContext) -> list[Any]:
        answer = ctx.recv("reply", timeout="10m")
        ctx.sleep(1)
        return [answer]

    run = app.run_workflow(impatient)
    assert run.status is RunStatus.SLEEPING and run.wake_at == clock.now() + 600
    clock.advance(600)
    asleep = app.continue_run(run.run_id)  # timed out; now in the sleep after it
    assert asleep.status is RunStatus.SLEEPING and asleep.recv_topic is None
    app.send(run.run_id, "reply", "too late")  # kept, but the recv is over
    clock.advance(1)
    assert app.continue_run(run.run_id).result == [None]


def test_a_message_before_the_timeout_wins(app: App, clock: FakeClock) -> None:
    @app.workflow
    def patient(ctx: TaskContext) -> Any:
        return ctx.recv("reply", timeout="1h")

    run = app.submit_run(patient)
    with worker_running(app):
        wait_for(app, run.run_id, RunStatus.SLEEPING)
        app.send(run.run_id, "reply", {"ok": True})
        done = wait_for(app, run.run_id, RunStatus.COMPLETED)
    assert done.result == {"ok": True}


def test_events_are_published_once_and_read_back(app: App, clock: FakeClock) -> None:
    @app.workflow
    def progress(ctx: TaskContext) -> None:
        ctx.set_event("stage", "started")
        ctx.sleep(5)
        ctx.set_event("stage", {"done": True})

    run = app.run_workflow(progress)
    assert app.get_event(run.run_id, "stage") == "started"
    assert app.get_event(run.run_id, "missing", wait=0.1) is None
    clock.advance(5)
    app.continue_run(run.run_id)
    assert app.get_event(run.run_id, "stage") == {"done": True}
    steps = [s.name for s in app.get_run(run.run_id).steps]
    assert steps == ["longcall.set_event", "longcall.sleep", "longcall.set_event"]


def test_bad_sends_are_refused_and_store_nothing(app: App) -> None:
    with pytest.raises(RunNotFound):
        app.send("run-nope", "orders", 1)
    with pytest.raises(RunNotFound):
        app.get_event("run-nope", "stage")

    @app.workflow
    def quick() -> int:
        return 1

    finished = app.run_workflow(quick)
    with pytest.raises(RunStateError, match="completed"):
        app.send(finished.run_id, "orders", 1)
    run = app.submit_run(inbox(app), 1)
    for topic in ("", "a\nb", "x" * 201, 7):
        with pytest.raises(InvalidValue, match="topic"):
            app.send(run.run_id, topic, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidValue, match="message"):
        app.send(run.run_id, "orders", object())
    with pytest.raises(InvalidValue, match="Idempotency-Key"):
        app.send(run.run_id, "orders", 1, idempotency_key="")
    app.send(run.run_id, "orders", "the only one")
    assert app.continue_run(run.run_id).result == ["the only one"]


def test_bad_recv_and_set_event_fail_the_run(app: App) -> None:
    @app.workflow
    def bad(ctx: TaskContext) -> None:
        ctx.recv("")

    run = app.run_workflow(bad)
    assert run.status is RunStatus.FAILED and "topic" in run.error["message"]

    @app.workflow
    def bad_key(ctx: TaskContext) -> None:
        ctx.set_event("k", object())

    assert app.run_workflow(bad_key).status is RunStatus.FAILED


def test_an_async_workflow_awaits_recv_and_set_event(app: App) -> None:
    @app.workflow
    async def echo(ctx: TaskContext) -> Any:
        await ctx.set_event("ready", True)
        return await ctx.recv("in")

    run = app.run_workflow(echo)
    assert run.status is RunStatus.SLEEPING and run.recv_topic == "in"
    assert app.get_event(run.run_id, "ready") is True
    app.send(run.run_id, "in", [1, 2])
    assert app.continue_run(run.run_id).result == [1, 2]


@pytest.mark.slow
def test_send_and_events_across_processes(db_url: str, tmp_path: Path) -> None:
    """The run executes in a worker process; this one sends to it and reads its events."""
    with build_app(db_url, tmp_path / "fx.log") as app:
        run = app.submit_run("relay")
        worker = spawn_worker(db_url, tmp_path, "w")
        try:
            assert app.get_event(run.run_id, "stage", wait=30) == "waiting"
            wait_for(app, run.run_id, RunStatus.SLEEPING, seconds=30)
            app.send(run.run_id, "in", "hello", idempotency_key="once")
            app.send(run.run_id, "in", "hello", idempotency_key="once")
            out = app.get_event(run.run_id, "out", wait=30)
            done = wait_for(app, run.run_id, RunStatus.COMPLETED, seconds=30)
        finally:
            kill(worker)
    assert out == {"echo": "hello", "pid": worker.pid}
    assert done.result == "relayed"
