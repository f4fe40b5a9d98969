"""``longcall runs``: submit with --app, list, show, watch, cancel and answer, with exit codes.

``submit --app test_cli_runs:APP`` loads this module's ``APP``, which each test sets to a new
App on its own database (the command closes the App it loaded).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner, Result

import longcall
from longcall import RunStatus, TaskContext
from longcall.cli.main import main

APP: longcall.App | None = None


class Order(pydantic.BaseModel):
    order_id: str
    amount: int


class Approval(pydantic.BaseModel):
    approved: bool


def build(url: str) -> longcall.App:
    """An App with refund (asks for an approval) and flaky (always fails)."""
    app = longcall.App(url)

    @app.workflow("refund")
    def refund(order: Order, ctx: TaskContext) -> dict[str, Any]:
        ctx.emit("asked", {"orderId": order.order_id})
        answer = ctx.interrupt("Approve?", schema=Approval)
        ctx.emit("answered", answer.approved)
        return {"refunded": answer.approved, "amount": order.amount}

    @app.workflow("flaky")
    def flaky(_: None) -> None:
        raise RuntimeError("down")

    return app


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with build(sqlite_url) as app:
        yield app


def cli(app: longcall.App, *args: str) -> Result:
    """``longcall runs ARGS`` on the app's database (``--app`` for submit), JSON out."""
    global APP
    if args[0] == "submit":
        APP = build(app.url)
        extra = ["--app", f"{__name__}:APP"]
    else:
        extra = ["--database", app.url]
    return CliRunner().invoke(main, ["runs", *args, *extra, "-o", "json"])


def submitted(app: longcall.App, *args: str) -> str:
    got = cli(app, "submit", *args)
    assert got.exit_code == 0, got.output
    return str(json.loads(got.stdout)["run"]["runId"])


def test_submit_checks_the_workflow_and_input_and_is_idempotent(app: longcall.App) -> None:
    """submit queues a run; the same --idempotency-key returns it again; an unknown workflow
    exits 3 and bad input exits 2, queuing nothing."""
    order = '{"order_id": "o-1", "amount": 5}'
    got = cli(
        app, "submit", "refund", "--input", order, "--idempotency-key", "k1", "--user", "alice"
    )
    assert got.exit_code == 0, got.output
    first = json.loads(got.stdout)
    assert first["created"] is True and first["run"]["status"] == "queued"
    run = app.store.get_run(first["run"]["runId"])
    assert (run.user_id, run.input) == ("alice", {"order_id": "o-1", "amount": 5})
    again = json.loads(
        cli(app, "submit", "refund", "--input", order, "--idempotency-key", "k1").stdout
    )
    assert again["created"] is False and again["run"]["runId"] == run.run_id

    unknown = cli(app, "submit", "nope", "--input", "{}")
    assert unknown.exit_code == 3 and "no workflow registered as 'nope'" in unknown.output
    wrong = cli(app, "submit", "refund", "--input", '{"order_id": "o"}')
    assert wrong.exit_code == 2 and "amount" in wrong.output
    not_json = cli(app, "submit", "refund", "--input", "{o")
    assert not_json.exit_code == 2 and "not valid JSON" in not_json.output
    not_app = CliRunner().invoke(main, ["runs", "submit", "refund", "--app", "json:dumps"])
    assert not_app.exit_code == 2 and "not a longcall.App" in not_app.output
    listed = json.loads(cli(app, "list").stdout)
    assert [r["runId"] for r in listed] == [run.run_id]


def test_list_filters_and_show_tells_the_whole_story(app: longcall.App) -> None:
    """list narrows by --status and --workflow; show has the question, steps and events."""
    refund = submitted(app, "refund", "--input", '{"order_id": "o-2", "amount": 9}')
    flaky = submitted(app, "flaky")
    app.continue_run(refund)

    def ids(*args: str) -> list[str]:
        got = cli(app, "list", *args)
        assert got.exit_code == 0, got.output
        return [r["runId"] for r in json.loads(got.stdout)]

    assert ids() == [flaky, refund]
    assert ids("--status", "waiting_input") == [refund]
    assert ids("--workflow", "flaky") == [flaky]
    assert ids("--status", "completed") == []
    assert cli(app, "list", "--status", "bogus").exit_code == 2

    shown = json.loads(cli(app, "show", refund).stdout)
    assert shown["status"] == "waiting_input"
    [question] = shown["pendingInterrupts"]
    assert question["key"] == "interrupt-1" and question["prompt"] == "Approve?"
    assert question["schema"]["required"] == ["approved"]
    assert [e["kind"] for e in shown["events"]] == ["asked"]
    table = CliRunner().invoke(main, ["runs", "show", refund, "--database", app.url, "-o", "table"])
    assert table.exit_code == 0 and "interrupt-1" in table.output and "Approve?" in table.output
    missing = cli(app, "show", "run-nope")
    assert missing.exit_code == 3 and "no run with id 'run-nope'" in missing.output


def test_answer_checks_the_answer_then_queues_the_run(app: longcall.App) -> None:
    """A wrong type or a question never asked exits 2 naming the key and stores nothing; a right
    answer queues the run; answering a run that is not waiting exits 5."""
    run_id = submitted(app, "refund", "--input", '{"order_id": "o-3", "amount": 4}')
    not_yet = cli(app, "answer", run_id, "--value", 'interrupt-1={"approved": true}')
    assert not_yet.exit_code == 5 and "not waiting for input" in not_yet.output
    app.continue_run(run_id)

    wrong = cli(app, "answer", run_id, "--value", 'interrupt-1={"approved": "yes"}')
    assert wrong.exit_code == 2
    assert "interrupt-1.approved: 'yes' is not of type 'boolean'" in wrong.output
    bad_key = cli(app, "answer", run_id, "--value", "go=1")
    assert bad_key.exit_code == 2 and "not a continuation key" in bad_key.output
    never_asked = cli(app, "answer", run_id, "--value", "interrupt-7=1")
    assert never_asked.exit_code == 2
    assert "error: interrupt-7: the run has not asked interrupt-7" in never_asked.output
    assert cli(app, "answer", run_id, "--value", "interrupt-1").exit_code == 2
    assert cli(app, "answer", run_id, "--value", "interrupt-1=yes").exit_code == 2
    assert app.store.get_run(run_id).status is RunStatus.WAITING_INPUT
    assert list(app.store.run_interrupts(run_id)) == ["interrupt-1"]
    assert not app.store.run_interrupts(run_id)["interrupt-1"].supplied

    got = cli(app, "answer", run_id, "--value", 'interrupt-1={"approved": true}')
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["status"] == "queued"
    assert app.continue_run(run_id).result == {"refunded": True, "amount": 4}


def test_resume_is_the_old_name_of_answer(app: longcall.App) -> None:
    """``runs resume`` still answers a run for one release, and says it is deprecated."""
    run_id = submitted(app, "refund", "--input", '{"order_id": "o-9", "amount": 3}')
    app.continue_run(run_id)
    got = cli(app, "resume", run_id, "--value", 'interrupt-1={"approved": true}')
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["status"] == "queued"
    assert "deprecated" in got.stderr and "runs answer" in got.stderr


def test_watch_follows_a_run_until_it_stops(app: longcall.App) -> None:
    """watch prints the events and the status and exits 0 for a waiting or completed run, 1 for
    a failed one, and 1 when --timeout passes first."""
    run_id = submitted(app, "refund", "--input", '{"order_id": "o-4", "amount": 1}')
    timed_out = cli(app, "watch", run_id, "--timeout", "200ms", "--interval", "50ms")
    assert timed_out.exit_code == 1 and "still queued" in timed_out.output
    app.continue_run(run_id)
    waiting = cli(app, "watch", run_id)
    assert waiting.exit_code == 0
    lines = [json.loads(line) for line in waiting.stdout.splitlines()]
    assert [(line["type"], line.get("kind") or line["status"]) for line in lines] == [
        ("event", "asked"),
        ("run", "waiting_input"),
    ]
    app.answer(run_id, {"interrupt-1": {"approved": False}})
    done = CliRunner().invoke(main, ["runs", "watch", run_id, "--database", app.url, "-o", "table"])
    assert done.exit_code == 0
    assert "#2 answered false" in done.output and "completed" in done.output

    flaky = submitted(app, "flaky")
    app.continue_run(flaky)
    failed = cli(app, "watch", flaky)
    assert (
        failed.exit_code == 1 and json.loads(failed.stdout.splitlines()[-1])["status"] == "failed"
    )
    assert cli(app, "watch", "run-nope").exit_code == 3


def test_cancel_and_cancel_again(app: longcall.App) -> None:
    """cancel ends a queued run; again it changes nothing, and --strict makes that exit 5."""
    run_id = submitted(app, "refund", "--input", '{"order_id": "o-5", "amount": 2}')
    got = cli(app, "cancel", run_id)
    assert got.exit_code == 0
    assert json.loads(got.stdout)["changed"] is True
    assert app.store.get_run(run_id).status is RunStatus.CANCELLED
    again = cli(app, "cancel", run_id)
    assert again.exit_code == 0 and json.loads(again.stdout)["changed"] is False
    assert cli(app, "cancel", run_id, "--strict").exit_code == 5
    assert cli(app, "cancel", "run-nope").exit_code == 3
