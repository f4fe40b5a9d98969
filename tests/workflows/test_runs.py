"""Runs end to end: task checkpoints and retries, events, cancellation, unknown workflows,
concurrent async tasks and input validation."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pydantic
import pytest

from longcall import App, RetryPolicy, RunStatus, TaskContext
from longcall.errors import RunNotFound, RunStateError, TaskError
from procs import sql_rows

FAST = RetryPolicy(max_attempts=3, initial="10ms", maximum="20ms", jitter=False)


class Order(pydantic.BaseModel):
    order_id: str
    amount: int


# -- the same task called twice --------------------------------------------------------------


def test_same_task_with_different_arguments_records_two_results(db_url: str) -> None:
    """Two calls with other arguments are two checkpoints, each replayed with its own result."""
    calls: Counter[int] = Counter()
    with App(db_url) as app:

        @app.task(name="double")
        def double(n: int) -> int:
            calls[n] += 1
            return n * 2

        @app.workflow("twice")
        def twice(_: None, ctx: TaskContext) -> list[int]:
            results = [double(2), double(5)]
            ctx.interrupt("Go on?")
            return results

        run = app.run_workflow("twice", None)
        steps = app.get_run(run.run_id).steps
        assert [(s.position, s.name, s.result) for s in steps] == [
            (1, "double", 4),
            (2, "double", 10),
        ]
        assert steps[0].args_hash != steps[1].args_hash
        run = app.answer(run.run_id, {"interrupt-1": None})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == [4, 10]
        assert calls == {2: 1, 5: 1}
        assert len(app.get_run(run.run_id).steps) == 2


def test_same_task_with_the_same_arguments_records_two_calls(db_url: str) -> None:
    """Two identical calls take two positions: both run, and replay gives each its result."""
    calls: list[str] = []
    with App(db_url) as app:

        @app.task(name="stamp")
        def stamp(label: str) -> str:
            calls.append(label)
            return f"{label}#{len(calls)}"

        @app.workflow("stamps")
        def stamps(_: None, ctx: TaskContext) -> list[str]:
            results = [stamp("x"), stamp("x")]
            ctx.interrupt("Go on?")
            return results

        run = app.run_workflow("stamps", None)
        steps = app.get_run(run.run_id).steps
        assert [(s.position, s.name, s.result) for s in steps] == [
            (1, "stamp", "x#1"),
            (2, "stamp", "x#2"),
        ]
        assert steps[0].args_hash == steps[1].args_hash
        run = app.answer(run.run_id, {"interrupt-1": None})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == ["x#1", "x#2"]
        assert calls == ["x", "x"]


# -- retries and failures --------------------------------------------------------------------


def test_sync_task_failing_twice_then_succeeding_records_three_attempts(db_url: str) -> None:
    """With max_attempts=3 a task failing twice succeeds on the third try: attempts=3."""
    attempts: list[int] = []
    with App(db_url) as app:

        @app.task(name="flaky", retry=FAST)
        def flaky(order_id: str) -> str:
            attempts.append(len(attempts) + 1)
            if len(attempts) < 3:
                raise ConnectionError(f"try {len(attempts)} failed")
            return f"fetched {order_id}"

        @app.workflow("retrying")
        def retrying(order_id: str) -> str:
            return flaky(order_id)

        run = app.run_workflow("retrying", "A-1")
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == "fetched A-1"
        assert attempts == [1, 2, 3]
        (step,) = app.get_run(run.run_id).steps
        assert (step.name, step.ok, step.result, step.attempts) == (
            "flaky",
            True,
            "fetched A-1",
            3,
        )


def test_async_task_failing_twice_then_succeeding_records_three_attempts(db_url: str) -> None:
    """The same retry policy holds for an async task in an async workflow."""
    attempts: list[int] = []
    with App(db_url) as app:

        @app.task(name="flaky_async", retry=FAST)
        async def flaky(order_id: str) -> str:
            attempts.append(len(attempts) + 1)
            if len(attempts) < 3:
                raise ConnectionError(f"try {len(attempts)} failed")
            return f"fetched {order_id}"

        @app.workflow("retrying_async")
        async def retrying(order_id: str) -> str:
            return str(await flaky(order_id))

        run = asyncio.run(app.run_workflow_async("retrying_async", "A-2"))
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == "fetched A-2"
        assert attempts == [1, 2, 3]
        (step,) = app.get_run(run.run_id).steps
        assert (step.ok, step.attempts) == (True, 3)


def test_task_failing_past_its_retries_raises_task_error_again_on_resume(db_url: str) -> None:
    """A task out of attempts raises TaskError at its call site, recorded; a resume raises
    the same TaskError from the record without running the task again."""
    attempts: list[int] = []
    caught: list[tuple[str, str, str, int]] = []
    with App(db_url) as app:

        @app.task(name="broken", retry=RetryPolicy(max_attempts=2, initial="10ms", jitter=False))
        def broken(order_id: str) -> str:
            attempts.append(len(attempts) + 1)
            raise ValueError(f"boom {len(attempts)}")

        @app.workflow("tolerant")
        def tolerant(order_id: str, ctx: TaskContext) -> dict[str, Any]:
            try:
                outcome = broken(order_id)
            except TaskError as exc:
                caught.append((exc.task, exc.error_type, exc.message, exc.attempts))
                outcome = "fallback"
            answer = ctx.interrupt("Carry on?", schema=bool)
            return {"outcome": outcome, "answer": answer}

        run = app.run_workflow("tolerant", "B-1")
        assert run.status is RunStatus.WAITING_INPUT
        assert caught == [("broken", "ValueError", "boom 2", 2)]
        (step,) = app.get_run(run.run_id).steps
        assert (step.position, step.name, step.ok, step.attempts) == (1, "broken", False, 2)
        assert step.result == {"error_type": "ValueError", "message": "boom 2", "attempts": 2}

        run = app.answer(run.run_id, {"interrupt-1": True})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == {"outcome": "fallback", "answer": True}
        assert caught == [("broken", "ValueError", "boom 2", 2)] * 2
        assert attempts == [1, 2]
        assert len(app.get_run(run.run_id).steps) == 1


def test_uncaught_task_error_fails_the_run(db_url: str) -> None:
    """A TaskError the workflow does not catch fails the run with its type and message."""
    attempts: list[int] = []
    with App(db_url) as app:

        @app.task(name="always_fails")
        def always_fails() -> None:
            attempts.append(1)
            raise KeyError("missing")

        @app.workflow("fragile")
        def fragile(_: None) -> str:
            always_fails()
            return "unreachable"

        run = app.run_workflow("fragile", None)
        assert run.status is RunStatus.FAILED
        assert run.error["type"] == "TaskError"
        assert "always_fails" in run.error["message"]
        assert "KeyError" in run.error["message"]
        assert attempts == [1]


# -- events ----------------------------------------------------------------------------------


def test_emits_are_not_duplicated_by_replay(db_url: str) -> None:
    """Events emitted before an interrupt are stored once, though the body runs twice."""
    with App(db_url) as app:

        @app.task(name="noisy")
        def noisy(n: int, ctx: TaskContext) -> int:
            ctx.emit("in-task", {"n": n})
            return n + 1

        @app.workflow("emitter")
        def emitter(n: int, ctx: TaskContext) -> int:
            ctx.emit("begin", {"n": n})
            m = noisy(n)
            ctx.emit("middle", {"m": m})
            ctx.emit("middle", {"m": m, "again": True})
            answer = ctx.interrupt("More?", schema=int)
            ctx.emit("end", {"answer": answer})
            return m + answer

        run = app.run_workflow("emitter", 1)
        assert [(e.seq, e.kind) for e in app.get_run(run.run_id).events] == [
            (1, "begin"),
            (2, "in-task"),
            (3, "middle"),
            (4, "middle"),
        ]
        run = app.answer(run.run_id, {"interrupt-1": 10})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == 12
        events = app.get_run(run.run_id).events
        assert [(e.seq, e.kind, e.data) for e in events] == [
            (1, "begin", {"n": 1}),
            (2, "in-task", {"n": 1}),
            (3, "middle", {"m": 2}),
            (4, "middle", {"m": 2, "again": True}),
            (5, "end", {"answer": 10}),
        ]


def test_run_events_are_read_live_while_the_run_executes(db_url: str) -> None:
    """``async for`` over app.run_events gets an event while the run is still running."""
    entered = threading.Event()
    release = threading.Event()
    with App(db_url) as app:

        @app.task(name="gate")
        def gate() -> bool:
            entered.set()
            return release.wait(30)

        @app.workflow("live")
        def live(_: None, ctx: TaskContext) -> bool:
            ctx.emit("started", 1)
            opened = gate()
            ctx.emit("finished", 2)
            return opened

        outcome: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: outcome.update(run=app.run_workflow("live", None, run_id="run-live"))
        )
        runner.start()
        try:
            assert entered.wait(30)

            async def read() -> list[tuple[str, Any, RunStatus]]:
                seen = []
                async for event in app.run_events("run-live"):
                    status = (await app.in_thread(app.store.get_run, "run-live")).status
                    seen.append((event.kind, event.data, status))
                    release.set()
                return seen

            seen = asyncio.run(asyncio.wait_for(read(), 30))
        finally:
            release.set()
            runner.join(30)
        # The first event arrived while the run was still running; the stream then followed
        # it to its end.
        assert [(kind, data) for kind, data, _ in seen] == [("started", 1), ("finished", 2)]
        assert seen[0][2] is RunStatus.RUNNING
        assert outcome["run"].status is RunStatus.COMPLETED
        assert outcome["run"].result is True


# -- cancellation ----------------------------------------------------------------------------


def test_cancel_a_waiting_run(db_url: str) -> None:
    """A run waiting for input is cancelled at once; it can then be neither resumed nor
    continued."""
    calls: list[str] = []
    with App(db_url) as app:

        @app.task(name="after_answer")
        def after_answer(answer: str) -> str:
            calls.append(answer)
            return answer

        @app.workflow("waiting")
        def waiting(_: None, ctx: TaskContext) -> str:
            return after_answer(ctx.interrupt("Answer?", schema=str))

        run = app.run_workflow("waiting", None)
        assert run.status is RunStatus.WAITING_INPUT
        cancelled = app.cancel_run(run.run_id)
        assert cancelled.status is RunStatus.CANCELLED
        assert cancelled.cancel_requested
        assert cancelled.finished_at is not None
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.CANCELLED
        assert details.pending == []
        with pytest.raises(RunStateError):
            app.answer(run.run_id, {"interrupt-1": "late"})
        with pytest.raises(RunStateError):
            app.continue_run(run.run_id)
        assert app.cancel_run(run.run_id).status is RunStatus.CANCELLED
        assert app.get_run(run.run_id).status is RunStatus.CANCELLED
        assert calls == []


def test_cancel_a_running_run_stops_it_at_its_next_task_call(db_url: str) -> None:
    """app.cancel_run on a running run: the task in flight finishes, the next call ends it."""
    entered = threading.Event()
    release = threading.Event()
    calls: list[str] = []
    with App(db_url) as app:

        @app.task(name="slow_first")
        def slow_first() -> str:
            calls.append("slow_first")
            entered.set()
            release.wait(30)
            return "first"

        @app.task(name="then")
        def then(n: int) -> int:
            calls.append(f"then{n}")
            return n

        @app.workflow("cancellable")
        def cancellable(_: None, ctx: TaskContext) -> list[Any]:
            return [slow_first(), then(1), then(2)]

        outcome: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: outcome.update(run=app.run_workflow("cancellable", None, run_id="rc"))
        )
        runner.start()
        try:
            assert entered.wait(30)
            assert app.cancel_run("rc").status is RunStatus.RUNNING
        finally:
            release.set()
            runner.join(30)
        assert calls == ["slow_first"]
        assert outcome["run"].status is RunStatus.CANCELLED
        details = app.get_run("rc")
        assert details.status is RunStatus.CANCELLED
        assert [s.name for s in details.steps] == ["slow_first"]


# -- unknown workflows -----------------------------------------------------------------------


def register_ghost(app: App) -> None:
    @app.workflow("ghost")
    def ghost(_: None, ctx: TaskContext) -> str:
        return str(ctx.interrupt("Boo?"))


def test_continue_a_waiting_run_whose_workflow_is_not_registered_fails_it(db_url: str) -> None:
    """A run continued by an App that lacks its workflow fails with WorkflowNotFound."""
    with App(db_url) as first:
        register_ghost(first)
        run = first.run_workflow("ghost", None)
        assert run.status is RunStatus.WAITING_INPUT
    with App(db_url) as second:
        run = second.continue_run(run.run_id)
        assert run.status is RunStatus.FAILED
        assert run.error["type"] == "WorkflowNotFound"
        assert "ghost" in run.error["message"]
        assert second.get_run(run.run_id).status is RunStatus.FAILED
        assert run.holder is None


def test_continue_a_queued_run_whose_workflow_is_not_registered_fails_it(db_url: str) -> None:
    """A queued run of a workflow this App does not know fails with WorkflowNotFound."""
    with App(db_url) as first:
        register_ghost(first)
        run, created = first.store.create_run("run-queued", "ghost", None)
        assert created and run.status is RunStatus.QUEUED
    with App(db_url) as second:
        run = second.continue_run("run-queued")
        assert run.status is RunStatus.FAILED
        assert run.error["type"] == "WorkflowNotFound"
        with pytest.raises(RunStateError):
            second.continue_run("run-queued")


# -- async workflows -------------------------------------------------------------------------


def test_gathered_async_tasks_keep_their_positions_across_a_resume(db_url: str) -> None:
    """Two async tasks under asyncio.gather take positions 1 and 2 in call order (not finish
    order); a resume skips both and the next call is position 3."""
    calls: Counter[str] = Counter()

    def build(url: str) -> App:
        app = App(url)

        @app.task(name="slow")
        async def slow(x: str) -> str:
            calls[f"slow {x}"] += 1
            await asyncio.sleep(0.1)
            return f"slow {x}"

        @app.task(name="quick")
        async def quick(x: str) -> str:
            calls[f"quick {x}"] += 1
            return f"quick {x}"

        @app.workflow("fan-out")
        async def fan_out(_: None, ctx: TaskContext) -> list[str]:
            a, b = await asyncio.gather(slow("a"), quick("b"))
            answer = await ctx.interrupt("Next?", schema=str)
            c = await quick(answer)
            return [a, b, c]

        return app

    async def scenario() -> tuple[list[Any], Any, list[Any]]:
        first = build(db_url)
        try:
            run = await first.run_workflow_async("fan-out", None)
            assert run.status is RunStatus.WAITING_INPUT
            before = (await first.in_thread(first.get_run, run.run_id)).steps
        finally:
            first.close()
        second = build(db_url)
        try:
            run = await second.answer_async(run.run_id, {"interrupt-1": "c"})
            after = (await second.in_thread(second.get_run, run.run_id)).steps
        finally:
            second.close()
        return before, run, after

    before, run, after = asyncio.run(scenario())
    # quick finished first, yet slow holds position 1: positions follow the calls.
    assert before[0].finished_at > before[1].finished_at
    assert [(s.position, s.name, s.result) for s in before] == [
        (1, "slow", "slow a"),
        (2, "quick", "quick b"),
    ]
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.result == ["slow a", "quick b", "quick c"]
    assert [(s.position, s.name, s.result) for s in after] == [
        (1, "slow", "slow a"),
        (2, "quick", "quick b"),
        (3, "quick", "quick c"),
    ]
    assert calls == {"slow a": 1, "quick b": 1, "quick c": 1}


# -- input ---------------------------------------------------------------------------------


def test_bad_input_raises_validation_error_and_creates_no_run(db_url: str) -> None:
    """run_workflow checks the input against the workflow's type before creating anything."""
    seen: list[type] = []
    with App(db_url) as app:

        @app.workflow("typed")
        def typed(order: Order) -> int:
            seen.append(type(order))
            return order.amount

        with pytest.raises(pydantic.ValidationError):
            app.run_workflow("typed", {"order_id": "A-1", "amount": "lots"}, run_id="run-bad")
        with pytest.raises(pydantic.ValidationError):
            asyncio.run(app.run_workflow_async("typed", {"amount": 1}, run_id="run-bad"))
        with pytest.raises(RunNotFound):
            app.get_run("run-bad")
        assert sql_rows(db_url, "SELECT count(*) FROM lc_runs") == [(0,)]
        assert seen == []

        run = app.run_workflow("typed", {"order_id": "A-1", "amount": "5"})
        assert run.status is RunStatus.COMPLETED
        assert run.result == 5
        assert run.input == {"order_id": "A-1", "amount": 5}
        assert seen == [Order]
