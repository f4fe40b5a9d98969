"""One name per concept: delivering a job's result to the agent, answering a run, unpausing a
schedule, and the same kind of answer from submitting a run and running one.

The names used before ("resume" for all four) keep working for one release, each with a
``DeprecationWarning`` pointing at its replacement.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator

import pytest

import longcall
from longcall import App, RunStatus, ScriptedAgent, TaskContext
from longcall.errors import InvalidAnswer, InvalidResume
from longcall.jobs.delivery import Deliverer


@pytest.fixture
def app(sqlite_url: str) -> Iterator[App]:
    """An App with ``ask``: one question, its answer returned."""
    with App(sqlite_url) as app:

        @app.workflow("ask")
        def ask(ctx: TaskContext) -> str:
            return str(ctx.interrupt("Name?"))

        yield app


def test_run_workflow_and_submit_run_both_return_a_run_that_says_if_it_is_new(app: App) -> None:
    """Both return a Run; ``created`` is True for the call that made it, False after."""
    here = app.run_workflow("ask", run_id="run-here")
    assert here.status is RunStatus.WAITING_INPUT and here.created
    assert not app.run_workflow("ask", run_id="run-here").created
    queued = app.submit_run("ask", idempotency_key="k")
    assert queued.status is RunStatus.QUEUED and queued.created
    again = app.submit_run("ask", idempotency_key="k")
    assert again.run_id == queued.run_id and not again.created
    assert not app.get_run(queued.run_id).run.created  # reads never say created
    assert again == app.get_run(queued.run_id).run  # created takes no part in equality


def test_answer_executes_here_and_submit_answers_queues(app: App) -> None:
    """``answer`` continues the run in this process; ``submit_answers`` leaves it to a worker."""
    here = app.run_workflow("ask")
    assert app.answer(here.run_id, {"interrupt-1": "ada"}).result == "ada"
    queued = app.run_workflow("ask")
    assert app.submit_answers(queued.run_id, {"interrupt-1": "bo"}).status is RunStatus.QUEUED
    assert app.continue_run(queued.run_id).result == "bo"
    other = app.run_workflow("ask")
    answered = asyncio.run(app.answer_async(other.run_id, {"interrupt-1": "cy"}))
    assert answered.result == "cy"


def test_the_old_names_warn_and_still_work(app: App) -> None:
    """``resume``, ``resume_async``, ``answer_run``, ``crons.resume`` and ``InvalidResume``
    still do what they did, each with a DeprecationWarning naming the new name."""
    first = app.run_workflow("ask")
    with pytest.warns(DeprecationWarning, match=r"App\.resume is deprecated.*App\.answer"):
        assert app.resume(first.run_id, {"interrupt-1": "ada"}).result == "ada"
    second = app.run_workflow("ask")
    with pytest.warns(DeprecationWarning, match=r"App\.resume_async .*App\.answer_async"):
        assert asyncio.run(app.resume_async(second.run_id, {"interrupt-1": "bo"})).result == "bo"
    third = app.run_workflow("ask")
    with pytest.warns(DeprecationWarning, match=r"App\.answer_run .*App\.submit_answers"):
        assert app.answer_run(third.run_id, {"interrupt-1": "cy"}).status is RunStatus.QUEUED
    cron = app.crons.create("nightly", "ask", "@daily", paused=True)
    with pytest.warns(DeprecationWarning, match=r"app\.crons\.resume .*app\.crons\.unpause"):
        assert app.crons.resume(cron.cron_id).paused is False
    assert app.crons.pause(cron.cron_id).paused is True
    assert app.crons.unpause(cron.cron_id).paused is False
    assert InvalidResume is InvalidAnswer
    fourth = app.run_workflow("ask")
    with pytest.raises(InvalidResume):
        app.answer(fourth.run_id, {"interrupt-7": "x"})


def test_the_old_names_of_the_deliverer_warn_and_still_work(app: App) -> None:
    """``longcall.Resumer``, ``longcall.resumer.Resumer`` and ``App.resumer`` are the
    deliverer under its old names, each with a DeprecationWarning."""
    with pytest.warns(DeprecationWarning, match=r"longcall\.Resumer .*longcall\.Deliverer"):
        assert longcall.Resumer is Deliverer
    old_module = importlib.import_module("longcall.resumer")
    with pytest.warns(DeprecationWarning, match=r"resumer\.Resumer .*longcall\.Deliverer"):
        assert old_module.Resumer is Deliverer
    with pytest.warns(DeprecationWarning, match=r"App\.resumer .*App\.deliverer"):
        assert isinstance(app.resumer(ScriptedAgent(app)), Deliverer)
    assert isinstance(app.deliverer(ScriptedAgent(app)), Deliverer)
