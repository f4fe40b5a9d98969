"""Run state through real runs: each reducer across resumes in fresh Apps, the validator."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from longcall import App, RunStatus, TaskContext
from longcall.workflows import (
    Append,
    Custom,
    Merge,
    Messages,
    RemoveMessage,
    Replace,
    StateSchemaValidator,
    Transient,
)


def join_unique(current: list[str], update: list[str]) -> list[str]:
    return current + [tag for tag in update if tag not in current]


FIELDS = {
    "log": Append(),
    "msgs": Messages(),
    "cfg": Merge(),
    "tags": Custom(join_unique, default=[]),
    "name": Replace(default="none"),
    "tmp": Transient(default="unset"),
}


def m(mid: str, text: str) -> dict[str, str]:
    return {"id": mid, "text": text}


def build(url: str, calls: Counter[str], tmp_seen: list[Any]) -> App:
    """An App with the ``reducers`` workflow: a task, interrupt-1, a task, interrupt-2."""
    app = App(url)

    @app.task(name="first_pass")
    def first_pass(ctx: TaskContext) -> str:
        calls["first_pass"] += 1
        ctx.set("log", "task-1")
        ctx.set("msgs", [m("m1", "hi"), m("m2", "there"), m("m3", "you")])
        ctx.set("cfg", {"a": 1, "b": 1})
        ctx.set("tags", ["x", "y"])
        ctx.set("name", "alpha")
        ctx.set("tmp", "from-task")
        return str(ctx.get("name"))  # a task reads its own changes

    @app.task(name="second_pass")
    def second_pass(answer: str, ctx: TaskContext) -> str:
        calls["second_pass"] += 1
        ctx.set("log", "task-2")
        ctx.set("msgs", [RemoveMessage("m1"), m("m2", "edited"), m("m4", answer)])
        ctx.set("cfg", {"b": 2, "c": 3})
        ctx.set("tags", ["y", "z"])
        ctx.set("name", "beta")
        return "second done"

    @app.workflow("reducers", state=FIELDS)
    def reducers(_: None, ctx: TaskContext) -> dict[str, Any]:
        ctx.set("log", "body-start")
        named = first_pass()
        tmp_seen.append(ctx.get("tmp"))
        answer = ctx.interrupt("First answer?", schema=str)
        second_pass(answer)
        ctx.set("log", f"answer:{answer}")
        last = ctx.interrupt("Second answer?", schema=str)
        ctx.set("name", last)
        return {"named": named, "tmp": ctx.get("tmp"), "state": ctx.state}

    return app


def test_each_reducer_survives_resumes_in_fresh_apps(db_url: str) -> None:
    """Append, Messages, Merge, Custom and Replace reach the same values after replay (no
    duplicates); a Transient set inside a skipped task is back to its default."""
    calls: Counter[str] = Counter()
    tmp_seen: list[Any] = []
    with build(db_url, calls, tmp_seen) as app:
        run = app.run_workflow("reducers", None)
        assert run.status is RunStatus.WAITING_INPUT
        (step,) = app.get_run(run.run_id).steps
        assert [name for name, _ in step.changes] == ["log", "msgs", "cfg", "tags", "name"]
    assert tmp_seen == ["from-task"]
    assert run.state == {
        "log": ["body-start", "task-1"],
        "msgs": [m("m1", "hi"), m("m2", "there"), m("m3", "you")],
        "cfg": {"a": 1, "b": 1},
        "tags": ["x", "y"],
        "name": "alpha",
    }

    with build(db_url, calls, tmp_seen) as app:
        run = app.answer(run.run_id, {"interrupt-1": "yes"})
        assert run.status is RunStatus.WAITING_INPUT, run.error
    # The task that set tmp was skipped: tmp is back to its default.
    assert tmp_seen == ["from-task", "unset"]
    assert run.state == {
        "log": ["body-start", "task-1", "task-2", "answer:yes"],
        "msgs": [m("m2", "edited"), m("m3", "you"), m("m4", "yes")],
        "cfg": {"a": 1, "b": 2, "c": 3},
        "tags": ["x", "y", "z"],
        "name": "beta",
    }

    with build(db_url, calls, tmp_seen) as app:
        run = app.answer(run.run_id, {"interrupt-2": "gamma"})
        assert run.status is RunStatus.COMPLETED, run.error
        assert len(app.get_run(run.run_id).steps) == 2
    final = {
        "log": ["body-start", "task-1", "task-2", "answer:yes"],
        "msgs": [m("m2", "edited"), m("m3", "you"), m("m4", "yes")],
        "cfg": {"a": 1, "b": 2, "c": 3},
        "tags": ["x", "y", "z"],
        "name": "gamma",
    }
    assert run.state == final
    assert run.result == {"named": "alpha", "tmp": "unset", "state": final}
    assert tmp_seen == ["from-task", "unset", "unset"]
    assert calls == {"first_pass": 1, "second_pass": 1}


def test_state_set_by_gathered_async_tasks_is_the_same_after_a_resume(db_url: str) -> None:
    """Changes from two concurrent tasks give the same state live and when replayed, whatever
    order the tasks finished in."""

    def build_gather(url: str) -> App:
        app = App(url)

        @app.task(name="slow_set")
        async def slow_set(ctx: TaskContext) -> None:
            await asyncio.sleep(0.1)
            ctx.set("log", "slow")
            ctx.set("cfg", {"winner": "slow"})

        @app.task(name="quick_set")
        async def quick_set(ctx: TaskContext) -> None:
            ctx.set("log", "quick")
            ctx.set("cfg", {"winner": "quick"})

        @app.workflow("gather-state", state={"log": Append(), "cfg": Merge()})
        async def gather_state(_: None, ctx: TaskContext) -> dict[str, Any]:
            await asyncio.gather(slow_set(), quick_set())
            seen = ctx.state
            await ctx.interrupt("Go on?")
            return seen

        return app

    with build_gather(db_url) as app:
        waiting = app.run_workflow("gather-state", None)
    assert waiting.status is RunStatus.WAITING_INPUT
    assert sorted(waiting.state["log"]) == ["quick", "slow"]
    with build_gather(db_url) as app:
        done = app.answer(waiting.run_id, {"interrupt-1": None})
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state == waiting.state
    assert done.result == waiting.state


def test_validator_errors_fail_the_run_listing_every_error(db_url: str) -> None:
    """A workflow's validator fails the run with StateValidationError naming each mismatch."""
    validator = (
        StateSchemaValidator()
        .expect_type("count", int)
        .require_field("owner")
        .expect_type("tags", list[str])
    )
    with App(db_url) as app:

        @app.task(name="fill")
        def fill(count: Any, ctx: TaskContext) -> None:
            ctx.set("count", count)

        @app.workflow("checked", validator=validator)
        def checked(good: bool, ctx: TaskContext) -> str:
            fill(3 if good else "five")
            ctx.set("tags", ["a", "b"] if good else ["a", 3])
            if good:
                ctx.set("owner", "ana")
            return "done"

        run = app.run_workflow("checked", False)
        assert run.status is RunStatus.FAILED
        assert run.result is None
        assert run.error["type"] == "StateValidationError"
        message = run.error["message"]
        assert "3 error(s)" in message
        lines = [line.strip() for line in message.splitlines()[1:]]
        assert [line.split(":")[0] for line in lines] == ["count", "owner", "tags.1"]
        assert "owner: required field missing" in lines
        assert run.state == {"count": "five", "tags": ["a", 3]}

        run = app.run_workflow("checked", True)
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == "done"
        assert run.state == {"count": 3, "tags": ["a", "b"], "owner": "ana"}
