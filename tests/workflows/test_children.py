"""Child workflows: ``ctx.start_child`` starts a run of its own, once, however often the parent
replays; ``handle.result()`` waits without a thread and gets the child's result or a typed
error; cancelling the parent cancels its children (unless abandoned); on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from longcall import (
    App,
    ChildCancelled,
    ChildFailed,
    ChildTimeout,
    RunStatus,
    WorkflowNotFound,
)
from longcall.core.clock import FakeClock
from longcall.errors import WorkflowError
from longcall.workflows import TaskContext
from procs import sql_rows

from .run_threads import worker_running

HOUR = 3600.0


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    with App(db_url, clock=clock, run_lease="2s") as app:
        calls: list[str] = []
        app.calls = calls  # type: ignore[attr-defined]

        @app.task
        def note(what: str) -> str:
            calls.append(what)
            return what

        @app.workflow
        def double(n: int) -> int:
            note(f"double {n}")
            if n < 0:
                raise ValueError(f"{n} is negative")
            return n * 2

        @app.workflow
        def held(ctx: TaskContext) -> str:
            return str(ctx.recv("go"))

        @app.workflow
        def parent(n: int, ctx: TaskContext) -> dict[str, Any]:
            handle = ctx.start_child("double", n)
            note("started")
            try:
                return {"value": handle.result(), "child": handle.run_id}
            except ChildFailed as exc:
                return {"failed": exc.error_type, "message": exc.message, "child": exc.run_id}

        @app.workflow
        def waiter(ctx: TaskContext) -> str:
            handle = ctx.start_child(held)
            try:
                return handle.result()
            except ChildCancelled as exc:
                return f"cancelled {exc.run_id}"

        yield app


def children(app: App, run_id: str) -> list[Any]:
    return app.get_run(run_id).children


def woken(app: App, run_id: str) -> bool:
    """Whether a worker may claim the run now (a waiting parent's is put off for ever)."""
    [(available_at,)] = sql_rows(
        app.url, f"SELECT available_at FROM lc_runs WHERE run_id = '{run_id}'"
    )
    return bool(available_at < 1e299)


def wait_for(app: App, run_id: str, status: RunStatus, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        run = app.store.get_run(run_id)
        if run.status is status:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.01)


def test_a_child_is_a_run_of_its_own_and_its_result_reaches_the_parent(app: App) -> None:
    """The parent sleeps while its child is queued, holding nothing; the child's end wakes it,
    and the parent's replay gets the result without starting the child again."""
    run = app.run_workflow("parent", 21)
    assert run.status is RunStatus.SLEEPING
    assert run.recv_topic is not None and run.recv_topic.startswith("longcall.child:")
    [child] = children(app, run.run_id)
    assert child.workflow_id == "double" and child.status is RunStatus.QUEUED
    assert child.parent_run_id == run.run_id and child.input == 21
    assert not woken(app, run.run_id)
    assert app.continue_run(child.run_id).status is RunStatus.COMPLETED
    assert woken(app, run.run_id)
    done = app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.result == {"value": 42, "child": child.run_id}
    assert [c.run_id for c in children(app, run.run_id)] == [child.run_id]
    assert app.calls == ["started", "double 21"]  # type: ignore[attr-defined]


def test_a_child_is_started_once_across_replays(app: App) -> None:
    """A parent that replays three times (an interrupt answered, then a retried failure)
    still has one child, started at the first execution."""
    tries: list[int] = []

    @app.workflow
    def replaying(ctx: TaskContext) -> int:
        first = ctx.start_child("double", 1)
        ctx.interrupt("go on?")
        second = ctx.start_child("double", 2, key="second")
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("fails once")
        return int(first.result()) + int(second.result())

    run = app.submit_run(replaying, max_retries=2)
    assert app.continue_run(run.run_id).status is RunStatus.WAITING_INPUT
    app.answer(run.run_id, {"interrupt-1": "yes"})  # fails, queued for its retry
    assert app.store.get_run(run.run_id).status is RunStatus.QUEUED
    assert app.continue_run(run.run_id).status is RunStatus.SLEEPING
    kids = children(app, run.run_id)
    assert sorted(c.input for c in kids) == [1, 2]
    for kid in kids:
        app.continue_run(kid.run_id)
    done = app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED and done.result == 6
    assert len(children(app, run.run_id)) == 2
    rows = sql_rows(app.url, f"SELECT count(*) FROM lc_runs WHERE parent_run_id = '{run.run_id}'")
    assert rows == [(2,)]


def test_a_childs_failure_reaches_the_parent_as_a_typed_error(app: App) -> None:
    """ChildFailed carries the child's run id, error type and message; uncaught, it fails the
    parent with that type."""
    run = app.run_workflow("parent", -5)
    [child] = children(app, run.run_id)
    assert app.continue_run(child.run_id).status is RunStatus.FAILED
    done = app.continue_run(run.run_id)
    assert done.result == {
        "failed": "ValueError",
        "message": "-5 is negative",
        "child": child.run_id,
    }

    @app.workflow
    def careless(ctx: TaskContext) -> int:
        return int(ctx.start_child("double", -1).result())

    run = app.run_workflow(careless)
    [child] = children(app, run.run_id)
    app.continue_run(child.run_id)
    failed = app.continue_run(run.run_id)
    assert failed.status is RunStatus.FAILED
    assert failed.error["type"] == "ChildFailed"
    assert "ValueError: -1 is negative" in failed.error["message"]


def test_a_worker_wakes_the_parent_when_the_child_ends(app: App) -> None:
    """With a worker, a parent waiting on a child that waits for a message completes once
    the message comes: the child's end queued the parent."""

    @app.workflow
    def relay(ctx: TaskContext) -> str:
        return "got " + str(ctx.start_child("held").result())

    with worker_running(app):
        run = app.submit_run(relay)
        asleep = wait_for(app, run.run_id, RunStatus.SLEEPING)
        [child] = children(app, run.run_id)
        wait_for(app, child.run_id, RunStatus.SLEEPING)
        assert asleep.holder is None
        app.send(child.run_id, "go", "it")
        done = wait_for(app, run.run_id, RunStatus.COMPLETED)
    assert done.result == "got it"


def test_cancelling_the_parent_cancels_its_children_and_theirs(app: App) -> None:
    """A grandchild two levels down is cancelled with the parent; an abandoned child goes on."""

    @app.workflow
    def middle(ctx: TaskContext) -> str:
        return str(ctx.start_child("held").result())

    @app.workflow
    def top(ctx: TaskContext) -> list[str]:
        kept = ctx.start_child("held", key="kept", on_parent_cancel="abandon")
        down = ctx.start_child(middle, key="down")
        return [down.result(), kept.result()]

    run = app.run_workflow(top)
    kids = {c.workflow_id: c for c in children(app, run.run_id)}
    assert app.continue_run(kids["middle"].run_id).status is RunStatus.SLEEPING
    [grandchild] = children(app, kids["middle"].run_id)
    app.cancel_run(run.run_id)
    status = {r: app.store.get_run(r).status for r in (run.run_id, kids["middle"].run_id)}
    assert set(status.values()) == {RunStatus.CANCELLED}
    assert app.store.get_run(grandchild.run_id).status is RunStatus.CANCELLED
    abandoned = app.store.get_run(kids["held"].run_id)
    assert abandoned.status is RunStatus.QUEUED and not abandoned.cancel_requested
    app.send(abandoned.run_id, "go", 1)
    assert app.continue_run(abandoned.run_id).status is RunStatus.COMPLETED


def test_cancelling_a_running_parent_cancels_its_children(app: App) -> None:
    """With a worker: the parent is waiting, its child running a long task; the cancel stops
    both, and the child's cancel does not wake the cancelled parent."""
    started = threading.Event()
    release = threading.Event()

    @app.task
    def slow() -> None:
        started.set()
        release.wait(20)

    @app.workflow
    def busy(ctx: TaskContext) -> str:
        slow()
        slow()
        return "done"

    @app.workflow
    def boss(ctx: TaskContext) -> str:
        return str(ctx.start_child(busy).result())

    with worker_running(app):
        run = app.submit_run(boss)
        assert started.wait(20)
        [child] = children(app, run.run_id)
        app.cancel_run(run.run_id)
        assert app.store.get_run(child.run_id).cancel_requested
        release.set()
        wait_for(app, child.run_id, RunStatus.CANCELLED)
        assert wait_for(app, run.run_id, RunStatus.CANCELLED).error["type"] == "Cancelled"


def test_a_cancelled_child_reaches_the_parent_as_child_cancelled(app: App) -> None:
    """The child cancelled on its own: the parent wakes and catches ChildCancelled."""
    run = app.run_workflow("waiter")
    [child] = children(app, run.run_id)
    app.cancel_run(child.run_id)
    assert woken(app, run.run_id)  # the child's cancel queued the parent, in its transaction
    done = app.continue_run(run.run_id)
    assert done.result == f"cancelled {child.run_id}"


def test_bad_starts_fail_clearly_and_start_nothing(app: App) -> None:
    """An unknown workflow, a wrong input, a bad on_parent_cancel or key, a key reused for
    another workflow: a clear error in the parent, and no child run beyond the first."""

    @app.workflow
    def bad(kind: str, ctx: TaskContext) -> None:
        if kind == "unknown":
            ctx.start_child("no-such-workflow", 1)
        elif kind == "input":
            ctx.start_child("double", "not a number")
        elif kind == "policy":
            ctx.start_child("double", 1, on_parent_cancel="ignore")
        elif kind == "key":
            ctx.start_child("double", 1, key="")
        elif kind == "reused":
            ctx.start_child("double", 1, key="k")
            ctx.start_child("held", key="k")

    expected = {
        "unknown": ("WorkflowNotFound", "no-such-workflow"),
        "input": ("ValidationError", "int"),
        "policy": ("WorkflowError", "'cancel' or 'abandon'"),
        "key": ("WorkflowError", "child key"),
        "reused": ("WorkflowError", "give each child its own key"),
    }
    for kind, (error_type, words) in expected.items():
        run = app.run_workflow(bad, kind)
        assert run.status is RunStatus.FAILED, kind
        assert run.error["type"] == error_type and words in run.error["message"], run.error
        assert len(children(app, run.run_id)) == (1 if kind == "reused" else 0), kind
    assert issubclass(WorkflowNotFound, WorkflowError)


def test_a_task_cannot_start_or_wait_for_a_child(app: App) -> None:
    """start_child belongs in the workflow body: a task that waited would run again."""

    @app.task
    def sneaky(ctx: TaskContext) -> None:
        ctx.start_child("double", 1)

    @app.workflow
    def body() -> None:
        sneaky()

    run = app.run_workflow(body)
    assert run.status is RunStatus.FAILED and "workflow body" in run.error["message"]


def test_an_async_parent_awaits_its_child(app: App) -> None:
    """``await ctx.start_child(...)`` and ``await handle.result()`` in an async workflow."""

    @app.workflow
    async def async_parent(ctx: TaskContext) -> int:
        handle = await ctx.start_child("double", 4)
        again = await ctx.start_child_async("double", 5)
        return int(await handle.result()) + int(await again.result_async()) + 1

    run = app.run_workflow(async_parent)
    assert run.status is RunStatus.SLEEPING
    kids = children(app, run.run_id)
    assert sorted(c.input for c in kids) == [4, 5]
    for kid in kids:
        app.continue_run(kid.run_id)
    done = app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED and done.result == 19


def test_a_wait_with_a_timeout_raises_child_timeout(app: App, clock: FakeClock) -> None:
    """handle.result(timeout="1h") on a child that does not end: ChildTimeout once the hour
    has passed on the database's clock; the child goes on."""

    @app.workflow
    def impatient(ctx: TaskContext) -> str:
        handle = ctx.start_child("held")
        try:
            return str(handle.result(timeout="1h"))
        except ChildTimeout as exc:
            return f"gave up on {exc.run_id}"

    run = app.run_workflow(impatient)
    assert run.status is RunStatus.SLEEPING and run.wake_at is not None
    [child] = children(app, run.run_id)
    clock.advance(HOUR + 1)
    done = app.continue_run(run.run_id)
    assert done.result == f"gave up on {child.run_id}"
    assert app.store.get_run(child.run_id).status is RunStatus.QUEUED


def test_runs_show_names_the_parent_and_the_children(app: App) -> None:
    """``longcall runs show`` of a parent lists its child; of the child, names the parent."""
    from click.testing import CliRunner

    from longcall.cli.main import main

    run = app.run_workflow("parent", 2)
    [child] = children(app, run.run_id)

    def show(run_id: str, *options: str) -> str:
        got = CliRunner().invoke(main, ["runs", "show", run_id, "--database", app.url, *options])
        assert got.exit_code == 0, got.output
        return got.output

    shown = json.loads(show(run.run_id, "-o", "json"))
    assert [c["runId"] for c in shown["children"]] == [child.run_id]
    assert json.loads(show(child.run_id, "-o", "json"))["parentRunId"] == run.run_id
    table = show(run.run_id, "-o", "table")
    assert "child" in table and child.run_id in table
    assert run.run_id in show(child.run_id, "-o", "table")


def test_no_wake_up_is_lost_when_children_end_as_parents_suspend(app: App) -> None:
    """40 parents whose children end at once, on a worker that polls only every minute: each
    parent is woken by its child's end (or sees it ended as it suspends), none waits for a
    poll."""

    @app.workflow
    def quick(n: int) -> int:
        return n

    @app.workflow
    def eager(n: int, ctx: TaskContext) -> int:
        return int(ctx.start_child(quick, n).result()) + 1

    with worker_running(app, concurrency=8, poll_interval="60s"):
        runs = [app.submit_run(eager, n) for n in range(40)]
        done = [wait_for(app, r.run_id, RunStatus.COMPLETED, seconds=30) for r in runs]
    assert [d.result for d in done] == [n + 1 for n in range(40)]
    counted = sql_rows(app.url, "SELECT count(*) FROM lc_runs WHERE parent_run_id IS NOT NULL")
    assert counted == [(40,)]


def test_a_child_created_as_its_parent_is_cancelled_is_cancelled_too(app: App) -> None:
    """The parent's cancel was asked just before its start reached the store: the child is
    cancelled in the transaction that creates it; an abandoned one is left queued."""
    parent = app.submit_run("held")
    app.store.hold_run(parent.run_id, "someone", lease=60)
    app.cancel_run(parent.run_id)  # running: flagged, it stops at its next task call
    store = app.store
    kept, _ = store.create_child_run(
        "run-kept",
        "held",
        None,
        parent_run_id=parent.run_id,
        child_key="a",
        on_parent_cancel="abandon",
    )
    gone, created = store.create_child_run(
        "run-gone",
        "held",
        None,
        parent_run_id=parent.run_id,
        child_key="b",
        on_parent_cancel="cancel",
    )
    assert created and gone.status is RunStatus.CANCELLED
    assert kept.status is RunStatus.QUEUED
    again, created = store.create_child_run(
        "run-other",
        "held",
        None,
        parent_run_id=parent.run_id,
        child_key="b",
        on_parent_cancel="cancel",
    )
    assert not created and again.run_id == "run-gone"
