"""Interrupts through a run: keys, typed answers, wrong answers, resumes, and divergence."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pydantic
import pytest

from longcall import App, RunStatus, TaskContext
from longcall.errors import InvalidAnswer, RunStateError


class Approval(pydantic.BaseModel):
    approved: bool
    approver: str


class Amount(pydantic.BaseModel):
    value: int


def answered(details: Any) -> list[tuple[str, str | None, bool]]:
    return [(i.key, i.prompt, i.answered) for i in details.interrupts]


@pytest.fixture
def two_questions(db_url: str) -> tuple[App, Counter[str]]:
    """An App with ``two``: a task, interrupt-1 (Approval), a task, interrupt-2 (Amount)."""
    app = App(db_url)
    calls: Counter[str] = Counter()

    @app.task(name="prepare")
    def prepare(order_id: str) -> str:
        calls["prepare"] += 1
        return f"prepared {order_id}"

    @app.task(name="charge")
    def charge(order_id: str, amount: int) -> str:
        calls["charge"] += 1
        return f"charged {amount} for {order_id}"

    @app.workflow("two")
    def two(order_id: str, ctx: TaskContext) -> dict[str, Any]:
        prepared = prepare(order_id)
        approval = ctx.interrupt(f"Approve {order_id}?", schema=Approval)
        if not isinstance(approval, Approval):
            raise TypeError(f"interrupt-1 came back as {type(approval).__name__}")
        amount = ctx.interrupt("How much?", schema=Amount)
        if not isinstance(amount, Amount):
            raise TypeError(f"interrupt-2 came back as {type(amount).__name__}")
        return {
            "prepared": prepared,
            "by": approval.approver,
            "charged": charge(order_id, amount.value),
        }

    yield app, calls
    app.close()


def test_two_interrupts_answered_in_two_resumes(two_questions: tuple[App, Counter[str]]) -> None:
    """Each resume answers one question; the run asks the next, and completes after both."""
    app, calls = two_questions
    run = app.run_workflow("two", "A-1")
    assert run.status is RunStatus.WAITING_INPUT
    assert [(i.key, i.prompt) for i in app.get_run(run.run_id).pending] == [
        ("interrupt-1", "Approve A-1?")
    ]

    run = app.answer(run.run_id, {"interrupt-1": {"approved": True, "approver": "ana"}})
    assert run.status is RunStatus.WAITING_INPUT
    details = app.get_run(run.run_id)
    assert [(i.key, i.prompt) for i in details.pending] == [("interrupt-2", "How much?")]
    assert answered(details) == [
        ("interrupt-1", "Approve A-1?", True),
        ("interrupt-2", "How much?", False),
    ]

    run = app.answer(run.run_id, {"interrupt-2": {"value": 42}})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.result == {"prepared": "prepared A-1", "by": "ana", "charged": "charged 42 for A-1"}
    assert calls == {"prepare": 1, "charge": 1}
    details = app.get_run(run.run_id)
    assert details.pending == []
    assert [s.name for s in details.steps] == ["prepare", "charge"]
    assert answered(details) == [
        ("interrupt-1", "Approve A-1?", True),
        ("interrupt-2", "How much?", True),
    ]


def test_two_interrupts_answered_in_one_resume(two_questions: tuple[App, Counter[str]]) -> None:
    """Answers for both keys in one resume: the second is taken when the run reaches it."""
    app, calls = two_questions
    run = app.run_workflow("two", "B-2")
    assert run.status is RunStatus.WAITING_INPUT
    run = app.answer(
        run.run_id,
        {"interrupt-1": {"approved": True, "approver": "bo"}, "interrupt-2": {"value": 7}},
    )
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.result == {"prepared": "prepared B-2", "by": "bo", "charged": "charged 7 for B-2"}
    assert calls == {"prepare": 1, "charge": 1}
    assert [(i.key, i.answered) for i in app.get_run(run.run_id).interrupts] == [
        ("interrupt-1", True),
        ("interrupt-2", True),
    ]


def test_an_answer_given_ahead_records_the_question_it_answered(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """interrupt-2 answered before it was asked still gets its prompt, schema and asked_at."""
    app, _ = two_questions
    run = app.run_workflow("two", "B-3")
    run = app.answer(
        run.run_id,
        {"interrupt-1": {"approved": True, "approver": "bo"}, "interrupt-2": {"value": 7}},
    )
    assert run.status is RunStatus.COMPLETED, run.error
    first, second = app.get_run(run.run_id).interrupts
    assert (first.key, first.prompt, first.asked_at is not None) == (
        "interrupt-1",
        "Approve B-3?",
        True,
    )
    assert (second.key, second.prompt, second.asked_at is not None) == (
        "interrupt-2",
        "How much?",
        True,
    )
    assert second.schema == Amount.model_json_schema()
    assert second.value == {"value": 7}


def test_wrong_type_answer_is_refused_with_paths_then_a_right_one_is_taken(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """A wrong answer raises InvalidAnswer naming each bad field; the run still waits for it."""
    app, calls = two_questions
    run = app.run_workflow("two", "C-3")
    with pytest.raises(InvalidAnswer) as caught:
        app.answer(run.run_id, {"interrupt-1": {"approved": "perhaps"}})
    assert caught.value.run_id == run.run_id
    assert [(e["key"], e["path"]) for e in caught.value.errors] == [
        ("interrupt-1", "approved"),
        ("interrupt-1", "approver"),
    ]
    details = app.get_run(run.run_id)
    assert details.status is RunStatus.WAITING_INPUT
    assert [i.key for i in details.pending] == ["interrupt-1"]
    (question,) = details.interrupts
    assert not question.answered
    assert not question.supplied  # the wrong value is not kept for the next execution
    assert calls == {"prepare": 1}

    run = app.answer(run.run_id, {"interrupt-1": {"approved": False, "approver": "cy"}})
    assert run.status is RunStatus.WAITING_INPUT
    assert [i.key for i in app.get_run(run.run_id).pending] == ["interrupt-2"]
    with pytest.raises(InvalidAnswer) as caught:
        app.answer(run.run_id, {"interrupt-2": {"value": "lots"}})
    assert [(e["key"], e["path"]) for e in caught.value.errors] == [("interrupt-2", "value")]
    run = app.answer(run.run_id, {"interrupt-2": {"value": 3}})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.result == {"prepared": "prepared C-3", "by": "cy", "charged": "charged 3 for C-3"}
    assert calls == {"prepare": 1, "charge": 1}


def test_bad_keys_are_refused_and_nothing_is_stored(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """interrupt-0, foo and an empty resume raise InvalidAnswer before anything is stored."""
    app, calls = two_questions
    run = app.run_workflow("two", "D-4")
    right = {"approved": True, "approver": "di"}
    for values in ({"interrupt-0": right}, {"foo": right}, {"interrupt-1": right, "foo": 1}, {}):
        with pytest.raises(InvalidAnswer) as caught:
            app.answer(run.run_id, values)
        assert caught.value.errors, values
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.WAITING_INPUT
        assert [(i.key, i.supplied, i.answered) for i in details.interrupts] == [
            ("interrupt-1", False, False)
        ]
    with pytest.raises(InvalidAnswer) as caught:
        app.answer(run.run_id, {"interrupt-0": right})
    assert [e["key"] for e in caught.value.errors] == ["interrupt-0"]
    assert calls == {"prepare": 1}


def test_answers_to_questions_never_asked_are_refused_and_nothing_runs(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """A key the run has not asked (interrupt-7, interrupt-3 past a gap, interrupt-2 without
    interrupt-1) raises InvalidAnswer naming it, from answer and submit_answers alike; nothing is
    stored and the run is not executed."""
    app, calls = two_questions
    run = app.run_workflow("two", "F-6")
    right = {"approved": True, "approver": "fi"}
    for values, keys in (
        ({"interrupt-7": right}, ["interrupt-7"]),
        ({"interrupt-1": right, "interrupt-3": {"value": 1}}, ["interrupt-3"]),
        ({"interrupt-2": {"value": 1}}, ["interrupt-2"]),
        ({"interrupt-99999999999999999999": 1}, ["interrupt-99999999999999999999"]),
    ):
        for answer in (app.answer, app.submit_answers):
            with pytest.raises(InvalidAnswer) as caught:
                answer(run.run_id, values)
            assert [e["key"] for e in caught.value.errors] == keys, values
            assert f"the run has not asked {keys[0]}" in str(caught.value)
    details = app.get_run(run.run_id)
    assert (details.status, details.run.executions) == (RunStatus.WAITING_INPUT, 1)
    assert [(i.key, i.supplied) for i in details.interrupts] == [("interrupt-1", False)]
    assert calls == {"prepare": 1}


def test_an_answer_to_a_question_already_answered_is_refused(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """Answers are final: answering interrupt-1 again, even beside a right interrupt-2, raises
    InvalidAnswer "already answered" and stores nothing; interrupt-2 alone is then taken."""
    app, calls = two_questions
    run = app.run_workflow("two", "G-7")
    run = app.answer(run.run_id, {"interrupt-1": {"approved": True, "approver": "gu"}})
    assert run.status is RunStatus.WAITING_INPUT
    again = {"interrupt-1": {"approved": False, "approver": "x"}, "interrupt-2": {"value": 2}}
    for answer in (app.answer, app.submit_answers):
        with pytest.raises(InvalidAnswer) as caught:
            answer(run.run_id, again)
        assert [(e["key"], e["message"]) for e in caught.value.errors] == [
            ("interrupt-1", "already answered (an answer is final)")
        ]
    details = app.get_run(run.run_id)
    assert (details.status, details.run.executions) == (RunStatus.WAITING_INPUT, 2)
    assert [(i.key, i.supplied, i.answered) for i in details.interrupts] == [
        ("interrupt-1", True, True),
        ("interrupt-2", False, False),
    ]
    run = app.answer(run.run_id, {"interrupt-2": {"value": 2}})
    assert run.status is RunStatus.COMPLETED and run.result["by"] == "gu"
    assert calls == {"prepare": 1, "charge": 1}


def test_resume_of_a_completed_run_is_a_run_state_error(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """A run that has completed cannot be resumed, and its record does not change."""
    app, calls = two_questions
    run = app.run_workflow("two", "E-5")
    run = app.answer(
        run.run_id,
        {"interrupt-1": {"approved": True, "approver": "ed"}, "interrupt-2": {"value": 1}},
    )
    assert run.status is RunStatus.COMPLETED
    with pytest.raises(RunStateError):
        app.answer(run.run_id, {"interrupt-3": 1})
    with pytest.raises(RunStateError):
        app.answer(run.run_id, {"interrupt-1": {"approved": False, "approver": "x"}})
    after = app.get_run(run.run_id)
    assert after.status is RunStatus.COMPLETED
    assert after.run.result == run.result
    assert [i.key for i in after.interrupts] == ["interrupt-1", "interrupt-2"]
    assert calls == {"prepare": 1, "charge": 1}


def test_interrupt_after_skipped_tasks_keeps_its_key(db_url: str) -> None:
    """Tasks skipped on resume take no key: the next question is interrupt-2, then done."""
    calls: Counter[str] = Counter()
    with App(db_url) as app:

        @app.task(name="step")
        def step(n: int) -> int:
            calls[f"step{n}"] += 1
            return n * n

        @app.workflow("chain")
        def chain(start: int, ctx: TaskContext) -> list[Any]:
            first = step(start)
            colour = ctx.interrupt("Which colour?", schema=str)
            second = step(start + 1)
            third = step(start + 2)
            size = ctx.interrupt(f"Which size for {colour}?", schema=int)
            return [first, colour, second, third, size]

        run = app.run_workflow("chain", 1)
        details = app.get_run(run.run_id)
        assert [(i.key, i.prompt) for i in details.pending] == [("interrupt-1", "Which colour?")]

        run = app.answer(run.run_id, {"interrupt-1": "red"})
        assert run.status is RunStatus.WAITING_INPUT
        details = app.get_run(run.run_id)
        assert [(i.key, i.prompt) for i in details.pending] == [
            ("interrupt-2", "Which size for red?")
        ]
        assert answered(details) == [
            ("interrupt-1", "Which colour?", True),
            ("interrupt-2", "Which size for red?", False),
        ]
        assert [(s.position, s.name) for s in details.steps] == [
            (1, "step"),
            (2, "step"),
            (3, "step"),
        ]

        run = app.answer(run.run_id, {"interrupt-2": 9})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == [1, "red", 4, 9, 9]
        assert calls == {"step1": 1, "step2": 1, "step3": 1}


def test_except_exception_around_interrupt_still_suspends(db_url: str) -> None:
    """A workflow catching Exception around ctx.interrupt cannot swallow the suspension."""
    swallowed: list[str] = []
    with App(db_url) as app:

        @app.workflow("careless")
        def careless(_: None, ctx: TaskContext) -> str:
            try:
                answer = ctx.interrupt("Name?", schema=str)
            except Exception as exc:  # the mistake this test is about
                swallowed.append(type(exc).__name__)
                answer = "nobody"
            return f"hello {answer}"

        run = app.run_workflow("careless", None)
        assert run.status is RunStatus.WAITING_INPUT
        assert run.result is None
        assert swallowed == []
        run = app.answer(run.run_id, {"interrupt-1": "ana"})
        assert run.status is RunStatus.COMPLETED
        assert run.result == "hello ana"
        assert swallowed == []


def test_answer_comes_back_as_the_declared_type_in_an_async_workflow(db_url: str) -> None:
    """``await ctx.interrupt(..., schema=Model)`` gives a model instance in an async workflow."""
    seen: list[type] = []
    with App(db_url) as app:

        @app.workflow("async-approval")
        async def approval(order_id: str, ctx: TaskContext) -> str:
            answer = await ctx.interrupt(f"Approve {order_id}?", schema=Approval)
            seen.append(type(answer))
            return f"{order_id}: {answer.approved} by {answer.approver}"

        run = app.run_workflow("async-approval", "F-6")
        assert run.status is RunStatus.WAITING_INPUT
        run = app.answer(run.run_id, {"interrupt-1": {"approved": True, "approver": "fa"}})
        assert run.status is RunStatus.COMPLETED, run.error
        assert run.result == "F-6: True by fa"
        assert seen == [Approval]


# -- divergence ------------------------------------------------------------------------------


def register_divergent(app: App, calls: Counter[str], *, argument: str, careful: bool) -> None:
    """``order`` calls ``lookup(argument)`` then waits for interrupt-1; ``careful`` wraps the
    task call in ``except Exception``."""

    @app.task(name="lookup")
    def lookup(key: str) -> str:
        calls[key] += 1
        return f"found {key}"

    @app.workflow("order")
    def order(_: None, ctx: TaskContext) -> dict[str, Any]:
        if careful:
            try:
                found = lookup(argument)
            except Exception as exc:
                found = f"caught {type(exc).__name__}"
        else:
            found = lookup(argument)
        ok = ctx.interrupt("Go on?", schema=bool)
        return {"found": found, "ok": ok}


@pytest.mark.parametrize("careful", [False, True], ids=["plain", "except-exception"])
def test_changed_task_arguments_fail_the_resumed_run_with_non_determinism(
    db_url: str, careful: bool
) -> None:
    """Resuming with a workflow that calls the task with other arguments fails the run."""
    calls: Counter[str] = Counter()
    with App(db_url) as old:
        register_divergent(old, calls, argument="a", careful=careful)
        run = old.run_workflow("order", None)
        assert run.status is RunStatus.WAITING_INPUT
    with App(db_url) as new:
        register_divergent(new, calls, argument="b", careful=careful)
        run = new.answer(run.run_id, {"interrupt-1": True})
        assert run.status is RunStatus.FAILED
        assert run.result is None
        assert run.error["type"] == "NonDeterminismError"
        assert "lookup" in run.error["message"]
        details = new.get_run(run.run_id)
        assert [(s.position, s.name, s.result) for s in details.steps] == [(1, "lookup", "found a")]
        with pytest.raises(RunStateError):
            new.answer(run.run_id, {"interrupt-1": True})
    assert calls == {"a": 1}


def test_rival_answers_submitted_at_once_take_one_and_refuse_the_other(
    two_questions: tuple[App, Counter[str]],
) -> None:
    """Two processes answering the same waiting question at the same instant: one answer is
    stored and queues the run, the other is refused as a state or answer error (never a
    missing run or a store error), and the run asks its next question once."""
    app, _ = two_questions
    for attempt in range(12):
        run = app.run_workflow("two", f"R-{attempt}")
        assert run.status is RunStatus.WAITING_INPUT
        outcomes = _answer_at_once(app, run.run_id, ("ana", "bo"))
        taken = [who for who, outcome in outcomes.items() if outcome is RunStatus.QUEUED]
        refused = [outcome for outcome in outcomes.values() if outcome is not RunStatus.QUEUED]
        assert len(taken) == 1, outcomes
        assert refused in ([RunStateError], [InvalidAnswer]), outcomes
        details = app.get_run(run.run_id)
        first = next(i for i in details.interrupts if i.key == "interrupt-1")
        assert first.value == {"approved": True, "approver": taken[0]}


def _answer_at_once(app: App, run_id: str, approvers: tuple[str, ...]) -> dict[str, object]:
    """Each approver answers interrupt-1 from its own thread, released together: the run's
    status after each answer taken, or the class of the error that refused it."""
    start = threading.Barrier(len(approvers))
    outcomes: dict[str, object] = {}

    def answer(approver: str) -> None:
        start.wait()
        try:
            answers = {"interrupt-1": {"approved": True, "approver": approver}}
            outcomes[approver] = app.submit_answers(run_id, answers).status
        except (RunStateError, InvalidAnswer) as exc:
            outcomes[approver] = type(exc)

    threads = [threading.Thread(target=answer, args=(who,)) for who in approvers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes
