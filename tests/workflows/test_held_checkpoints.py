"""A sync run on PostgreSQL holds its last task call's checkpoint back and writes it with
its end: one commit fewer per run. It is still written before the next task call's body, by
a retry, a wait for input or a read of ``ctx.cancelled``, and within the checkpoint delay
when the run goes on without recording anything; never by an execution that lost the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from longcall import App, RunStatus, TaskContext
from longcall.store.runs import Checkpoint
from longcall.workflows._checkpoints import LateCheckpoints

from .test_background import drain


def counting_writes(app: App) -> list[str]:
    """The checkpoints the app writes by themselves (not with the run's end), by task name."""
    written: list[str] = []
    record_step = app.store.record_step

    def counted(run_id: str, holder: str, step: Checkpoint, *, ok: bool) -> Any:
        written.append(step.name)
        return record_step(run_id, holder, step, ok=ok)

    app.store.record_step = counted  # type: ignore[method-assign]
    return written


def one_task_app(url: str, **options: Any) -> App:
    app = App(url, run_lease="2s", run_retry="50ms", **options)

    @app.task(name="double")
    def double(n: int) -> int:
        return n * 2

    @app.workflow("once")
    def once(n: int) -> int:
        return int(double(n)) + 1

    return app


def going_on_after_its_task(app: App, n: int) -> tuple[threading.Event, Callable[[], Any]]:
    """Execute, in a thread, a run of "double" that then waits (its workflow going on after
    its last task) until the event is set; the second value waits for the run's end. Returns
    once the run exists."""
    release = threading.Event()

    @app.workflow("goes_on")
    def goes_on(n: int) -> int:
        value = app.workflows.tasks["double"](n)
        release.wait(30)
        return int(value)

    outcome: list[Any] = []
    executing = threading.Thread(target=lambda: outcome.append(app.run_workflow("goes_on", n)))
    executing.start()
    give_up = time.monotonic() + 10
    while not app.store.list_runs():
        assert time.monotonic() < give_up, "the run did not start"
        time.sleep(0.01)

    def ended() -> Any:
        release.set()
        executing.join(30)
        return outcome[0]

    return release, ended


def test_a_one_task_run_writes_its_checkpoint_with_its_end(db_url: str) -> None:
    """Executed here and by a worker (whose end also claims the next run): the checkpoint
    is there afterwards, complete; on PostgreSQL no statement of its own wrote it, on SQLite
    (whose end statement cannot) one did, as the task returned."""
    app = one_task_app(db_url)
    written = counting_writes(app)
    try:
        here = app.run_workflow("once", 1)
        queued = [app.submit_run("once", n).run_id for n in range(2, 6)]
        drain(app, queued, concurrency=2)
        for run_id, n in zip([here.run_id, *queued], range(1, 6), strict=True):
            details = app.get_run(run_id)
            assert details.status is RunStatus.COMPLETED
            assert details.run.result == n * 2 + 1
            [step] = details.steps
            assert (step.position, step.name, step.ok, step.result) == (1, "double", True, n * 2)
            assert step.attempts == 1
            assert step.started_at <= step.finished_at <= details.run.finished_at
        assert written == ([] if db_url.startswith("postgres") else ["double"] * 5)
    finally:
        app.close()


def test_the_next_task_call_finds_the_checkpoint_before_it_starts(pg_url: str) -> None:
    """The second task's body reads the store: the first call's checkpoint is committed."""
    app = App(pg_url, checkpoint_delay="60s")  # only the next call writes it
    seen: list[list[str]] = []

    @app.task(name="first")
    def first() -> str:
        return "a"

    @app.task(name="second")
    def second(ctx: TaskContext) -> str:
        seen.append([s.name for s in app.get_run(ctx.run_id).steps])
        return "b"

    @app.workflow("pair")
    def pair() -> str:
        return str(first()) + str(second())

    try:
        run = app.run_workflow("pair")
        assert run.result == "ab"
        assert seen == [["first"]]
        assert [s.name for s in app.get_run(run.run_id).steps] == ["first", "second"]
    finally:
        app.close()


def test_a_run_that_goes_on_after_its_task_has_the_checkpoint_written_within_the_delay(
    pg_url: str,
) -> None:
    """After its task the workflow computes for a long while: the checkpoint is committed
    within the delay (20 ms by default), not left to the run's end."""
    app = one_task_app(pg_url)
    release, ended = going_on_after_its_task(app, 4)
    try:
        run_id = app.store.list_runs()[0].run_id
        give_up = time.monotonic() + 10
        while not app.get_run(run_id).steps:
            assert time.monotonic() < give_up, "no checkpoint while the run went on"
            time.sleep(0.01)
        details = app.get_run(run_id)
        assert details.status is RunStatus.RUNNING
        assert [(s.name, s.result) for s in details.steps] == [("double", 8)]
        assert ended().status is RunStatus.COMPLETED
        assert len(app.get_run(run_id).steps) == 1
    finally:
        release.set()
        app.close()


def test_an_execution_that_lost_its_run_does_not_write_the_checkpoint_it_held(
    pg_url: str,
) -> None:
    """The run is taken over while its workflow goes on after the task: the statement that
    would end it writes neither the end nor the checkpoint held back."""
    app = one_task_app(pg_url, checkpoint_delay="60s")
    release, ended = going_on_after_its_task(app, 3)
    try:
        run_id = app.store.list_runs()[0].run_id
        time.sleep(0.2)  # the task has returned; its checkpoint is held back
        assert app.get_run(run_id).steps == []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE lc_runs SET holder = 'another' WHERE run_id = %s", (run_id,))
        ended()
        details = app.get_run(run_id)
        assert (details.status, details.run.holder) == (RunStatus.RUNNING, "another")
        assert details.steps == []
    finally:
        release.set()
        app.close()


def test_a_retried_attempt_writes_the_checkpoint_it_held_and_resumes_after_it(
    pg_url: str,
) -> None:
    """The workflow fails after its task returned: the retry's statement writes the
    checkpoint, and the next attempt does not call the task again."""
    app = one_task_app(pg_url, checkpoint_delay="60s")
    calls: list[int] = []
    attempts: list[int] = []

    @app.task(name="counted")
    def counted(n: int) -> int:
        calls.append(n)
        return n

    @app.workflow("flaky")
    def flaky(n: int) -> int:
        value = int(counted(n))
        attempts.append(n)
        if len(attempts) == 1:
            raise RuntimeError("the first attempt fails after its task")
        return value

    try:
        run = app.submit_run("flaky", 9, max_retries=1)
        drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert (details.status, details.run.result) == (RunStatus.COMPLETED, 9)
        assert calls == [9]
        assert attempts == [9, 9]
        assert [(s.name, s.ok) for s in details.steps] == [("counted", True)]
    finally:
        app.close()


def test_a_run_that_waits_for_input_writes_the_checkpoint_it_held(pg_url: str) -> None:
    """The task returns, then the workflow asks for input: the checkpoint is written with
    the wait, and the resumed run does not call the task again."""
    app = one_task_app(pg_url, checkpoint_delay="60s")
    calls: list[int] = []

    @app.task(name="prepare")
    def prepare(n: int) -> int:
        calls.append(n)
        return n * 3

    @app.workflow("asks")
    def asks(n: int, ctx: TaskContext) -> int:
        base = int(prepare(n))
        return base + int(ctx.interrupt("how many more?", schema=int))

    try:
        waiting = app.run_workflow("asks", 2)
        assert waiting.status is RunStatus.WAITING_INPUT
        assert [(s.name, s.result) for s in app.get_run(waiting.run_id).steps] == [("prepare", 6)]
        done = app.answer(waiting.run_id, {"interrupt-1": 4})
        assert (done.status, done.result) == (RunStatus.COMPLETED, 10)
        assert calls == [2]
    finally:
        app.close()


@pytest.mark.parametrize("delay", ["0s", "20ms"])
def test_a_checkpoint_delay_of_zero_writes_each_checkpoint_as_its_task_returns(
    pg_url: str, delay: str
) -> None:
    app = one_task_app(pg_url, checkpoint_delay=delay)
    written = counting_writes(app)
    try:
        assert app.run_workflow("once", 5).result == 11
        assert written == (["double"] if delay == "0s" else [])
    finally:
        app.close()


# -- the late writer itself --------------------------------------------------------------


class Holding:
    """An execution for :class:`LateCheckpoints`: notes when it was asked to write."""

    def __init__(self) -> None:
        self.writes: list[float] = []

    def write_held_back(self) -> None:
        self.writes.append(time.monotonic())


def written_within(holding: Holding, seconds: float) -> bool:
    give_up = time.monotonic() + seconds
    while not holding.writes and time.monotonic() < give_up:
        time.sleep(0.005)
    return bool(holding.writes)


def test_the_late_writer_writes_a_checkpoint_once_its_delay_has_passed() -> None:
    late = LateCheckpoints(0.05)
    holding = Holding()
    try:
        held_at = time.monotonic()
        late.held(holding)
        assert written_within(holding, 5)
        time.sleep(0.15)
        assert len(holding.writes) == 1
        assert holding.writes[0] - held_at >= 0.05
    finally:
        late.close()


def test_the_late_writer_leaves_alone_a_checkpoint_released_in_time() -> None:
    late = LateCheckpoints(0.05)
    first, second = Holding(), Holding()
    try:
        late.held(first)
        late.released(first)
        late.held(second)
        assert written_within(second, 5)
        time.sleep(0.15)
        assert first.writes == []
    finally:
        late.close()


@pytest.mark.parametrize("pause", [0.01, 0.3], ids=["while-it-waits-a-delay", "once-quiet"])
def test_the_late_writer_writes_a_checkpoint_held_after_the_last_was_released(
    pause: float,
) -> None:
    """Nobody wakes the writer for a hold while it waits out a delay after the last one
    went: it must wake in time anyway. After a whole delay with nothing held it waits to be
    told, and is."""
    late = LateCheckpoints(0.05)
    first, second = Holding(), Holding()
    try:
        late.held(first)
        assert written_within(first, 5)
        time.sleep(pause)
        held_at = time.monotonic()
        late.held(second)
        assert written_within(second, 5)
        assert 0.05 <= second.writes[0] - held_at < 1.0
    finally:
        late.close()
