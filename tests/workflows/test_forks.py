"""Time travel: ``app.run_history`` lists a run's steps with the state after each, and
``app.fork_run`` starts a new run that reuses the steps before the one it forks from and
executes the rest on the current code. On SQLite and on PostgreSQL, with a worker here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from longcall import App, RunStatus
from longcall.errors import InvalidValue, NonDeterminismError, RunNotFound, WorkflowNotFound
from longcall.workflows import Append, TaskContext

from .test_background import drain


def five_steps(url: str) -> tuple[App, Counter[int], dict[str, Any]]:
    """An app whose workflow calls five tasks; each real execution is counted, and what a
    task returns depends on ``code["version"]`` (the code the worker has now)."""
    app = App(url, run_lease="2s", run_retry="50ms")
    executed: Counter[int] = Counter()
    code: dict[str, Any] = {"version": 1, "broken": None}

    @app.task(name="step")
    def step(i: int, scale: int, ctx: TaskContext) -> str:
        executed[i] += 1
        if code["broken"] == i:
            raise RuntimeError(f"step {i} is broken")
        ctx.set("done", i)
        return f"v{code['version']}:{i * scale}"

    @app.workflow("five", state={"done": Append()})
    def five(inp: dict[str, int], ctx: TaskContext) -> list[str]:
        # Steps 1 and 2 do not depend on the input's scale; 3 to 5 do.
        return [step(i, 1 if i < 3 else inp["scale"]) for i in range(1, 6)]

    return app, executed, code


def test_a_fork_from_step_3_of_5_reuses_1_and_2_and_executes_3_to_5(db_url: str) -> None:
    """The fork copies steps 1-2 (they do not execute again) and executes 3-5 on the
    current code; it records where it came from and keeps the original's owner."""
    app, executed, code = five_steps(db_url)
    try:
        original = app.submit_run("five", {"scale": 1}, user_id="u1")
        drain(app, [original.run_id])
        assert app.get_run(original.run_id).run.result == [f"v1:{i}" for i in range(1, 6)]
        assert executed == dict.fromkeys(range(1, 6), 1)

        code["version"] = 2
        fork = app.fork_run(original.run_id, from_step=3)
        assert fork.status is RunStatus.QUEUED
        assert (fork.forked_from, fork.forked_step) == (original.run_id, 3)
        assert fork.user_id == "u1" and fork.input == {"scale": 1}
        assert [s.position for s in app.get_run(fork.run_id).steps] == [1, 2]
        drain(app, [fork.run_id])

        forked = app.get_run(fork.run_id)
        assert forked.status is RunStatus.COMPLETED, forked.run.error
        assert forked.run.result == ["v1:1", "v1:2", "v2:3", "v2:4", "v2:5"]
        assert executed == {1: 1, 2: 1, 3: 2, 4: 2, 5: 2}
        assert forked.run.state == {"done": [1, 2, 3, 4, 5]}
        # The original is as it was.
        assert app.get_run(original.run_id).run.result == [f"v1:{i}" for i in range(1, 6)]
    finally:
        app.close()


def test_a_fork_goes_to_the_originals_queue_with_its_priority(db_url: str) -> None:
    """A fork of a queued run counts against the same queue's limits: it is submitted to it
    with the original's priority (not its dedupe id), and only a worker of that queue runs it."""
    app, executed, _ = five_steps(db_url)
    try:
        app.queue("reports", concurrency=1, priority=True)
        original = app.submit_run("five", {"scale": 1}, queue="reports", priority=3,
                                  dedupe_id="monthly")  # fmt: skip
        drain(app, [original.run_id], queues=["reports"])
        fork = app.fork_run(original.run_id, from_step=4)
        assert (fork.queue_name, fork.priority, fork.dedupe_id) == ("reports", 3, None)
        drain(app, [fork.run_id], queues=["reports"])
        assert app.get_run(fork.run_id).status is RunStatus.COMPLETED
        assert executed == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
        (stats,) = app.queue_stats()
        assert stats.queue.name == "reports" and stats.counts == {}
    finally:
        app.close()


def test_a_fork_with_a_new_input_executes_the_steps_after_the_fork_with_it(db_url: str) -> None:
    """A new input reaches the steps from the fork on; a copied step whose call the new
    input changes fails the fork as not deterministic."""
    app, executed, _ = five_steps(db_url)
    try:
        original = app.run_workflow("five", {"scale": 1})
        assert original.status is RunStatus.COMPLETED
        fork = app.fork_run(original.run_id, from_step=3, input={"scale": 10})
        assert fork.input == {"scale": 10}
        # Step 3 takes the scale: copying it would hand the fork a result for another call.
        clash = app.fork_run(original.run_id, from_step=4, input={"scale": 10})
        drain(app, [fork.run_id, clash.run_id])

        assert app.get_run(fork.run_id).run.result == ["v1:1", "v1:2", "v1:30", "v1:40", "v1:50"]
        failed = app.get_run(clash.run_id).run
        assert failed.status is RunStatus.FAILED
        assert failed.error["type"] == NonDeterminismError.__name__
        assert executed == {1: 1, 2: 1, 3: 2, 4: 2, 5: 2}
    finally:
        app.close()


def test_history_lists_each_step_with_its_output_and_the_state_after_it(db_url: str) -> None:
    """Tasks, sleeps, recv (with its timeout) and set_event are numbered steps, in call
    order; each entry has its kind, output and the state the tasks left."""
    app = App(db_url)
    try:

        @app.task(name="add")
        def add(n: int, ctx: TaskContext) -> int:
            ctx.set("seen", n)
            return n + 1

        @app.workflow("mixed", state={"seen": Append()})
        def mixed(n: int, ctx: TaskContext) -> int:
            a = add(n)
            ctx.sleep(0)
            ctx.set_event("half", a)
            got = ctx.recv("nudge", timeout=0)
            return add(a) + (0 if got is None else 100)

        run = app.run_workflow("mixed", 1)
        assert run.status is RunStatus.COMPLETED, run.error
        history = app.run_history(run.run_id)
        assert [(h.step, h.kind, h.name) for h in history] == [
            (1, "task", "add"),
            (2, "sleep", "longcall.sleep"),
            (3, "set_event", "longcall.set_event"),
            (4, "recv_timeout", "longcall.recv_timeout"),
            (5, "recv", "longcall.recv"),
            (6, "task", "add"),
        ]
        assert [h.output for h in history if h.kind == "task"] == [2, 3]
        assert history[4].output == {"message": None, "timed_out": True}
        assert [h.state for h in history] == [
            {"seen": [1]},
            {"seen": [1]},
            {"seen": [1]},
            {"seen": [1]},
            {"seen": [1]},
            {"seen": [1, 2]},
        ]
        assert all(h.ok and h.error is None for h in history)
        assert all(h.started_at <= h.finished_at for h in history)
        assert history[0].changes == [("seen", 1)]
        # The state of a fork at its step is the history's state before that step.
        fork = app.fork_run(run.run_id, from_step=6)
        drain(app, [fork.run_id])
        assert app.get_run(fork.run_id).run.state == {"seen": [1, 2]}
        assert [h.step for h in app.run_history(fork.run_id)] == [1, 2, 3, 4, 5, 6]
    finally:
        app.close()


def test_a_failed_run_fixed_and_forked_from_its_failing_step_completes(db_url: str) -> None:
    """The classic use: a run fails at step 3; with the code fixed, a fork from step 3
    executes only steps 3-5 and completes."""
    app, executed, code = five_steps(db_url)
    try:
        code["broken"] = 3
        original = app.run_workflow("five", {"scale": 1})
        assert original.status is RunStatus.FAILED
        history = app.run_history(original.run_id)
        assert [(h.step, h.ok) for h in history] == [(1, True), (2, True), (3, False)]
        assert history[2].error["message"] == "step 3 is broken"
        assert history[2].output is None

        code["broken"] = None
        fork = app.fork_run(original.run_id, from_step=history[-1].step)
        drain(app, [fork.run_id])
        assert app.get_run(fork.run_id).run.result == [f"v1:{i}" for i in range(1, 6)]
        assert executed == {1: 1, 2: 1, 3: 2, 4: 1, 5: 1}
        assert app.get_run(original.run_id).status is RunStatus.FAILED
    finally:
        app.close()


def test_a_fork_of_a_waiting_run_asks_its_question_again(db_url: str) -> None:
    """Answers are not steps: a run still waiting for input can be forked, and the fork
    replays the copied steps and waits at the same question."""
    app = App(db_url, run_lease="2s")
    calls: Counter[str] = Counter()
    try:

        @app.task(name="prep")
        def prep(n: int) -> int:
            calls["prep"] += 1
            return n * 2

        @app.workflow("asks")
        def asks(n: int, ctx: TaskContext) -> str:
            doubled = prep(n)
            name = ctx.interrupt("Name?", schema=str)
            return f"{name}:{prep(doubled)}"

        original = app.run_workflow("asks", 5)
        assert original.status is RunStatus.WAITING_INPUT
        fork = app.fork_run(original.run_id, from_step=2)
        ran = app.continue_run(fork.run_id)
        assert ran.status is RunStatus.WAITING_INPUT
        assert calls == {"prep": 1}
        done = app.answer(fork.run_id, {"interrupt-1": "ada"})
        assert done.result == "ada:20"
        assert calls == {"prep": 2}
        assert app.get_run(original.run_id).status is RunStatus.WAITING_INPUT
    finally:
        app.close()


def test_bad_forks_are_refused_and_create_nothing(db_url: str) -> None:
    """An unknown run, a step out of range, a wrong input or a workflow not registered
    raise a clear error and no run is created."""
    app, _, _ = five_steps(db_url)
    try:
        original = app.run_workflow("five", {"scale": 1})
        before = len(app.list_runs())
        with pytest.raises(RunNotFound):
            app.fork_run("run-nope", from_step=1)
        for step in (0, -1, 7, True, "3"):
            with pytest.raises(InvalidValue, match="from_step"):
                app.fork_run(original.run_id, from_step=step)  # type: ignore[arg-type]
        with pytest.raises(InvalidValue, match="input"):
            app.fork_run(original.run_id, from_step=1, input="not a dict")
        with pytest.raises(InvalidValue, match="runId"):
            app.fork_run("bad\x00id", from_step=1)
        other = App(db_url)
        try:
            with pytest.raises(WorkflowNotFound):
                other.fork_run(original.run_id, from_step=1)
            with pytest.raises(RunNotFound):
                other.run_history("run-nope")
            # Without the workflow's reducers the steps are listed, their state is not.
            assert [h.state for h in other.run_history(original.run_id)] == [None] * 5
        finally:
            other.close()
        assert len(app.list_runs()) == before
        # One past the last step is allowed: it replays every step.
        whole = app.fork_run(original.run_id, from_step=6)
        assert [s.position for s in app.get_run(whole.run_id).steps] == [1, 2, 3, 4, 5]
    finally:
        app.close()
