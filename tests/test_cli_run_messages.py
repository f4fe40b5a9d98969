"""``longcall runs send``: a message kept for a run's recv, with its exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

import longcall
from longcall import RunStatus, TaskContext
from longcall.cli.main import main


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with longcall.App(sqlite_url) as app:

        @app.workflow("inbox")
        def inbox(ctx: TaskContext) -> Any:
            return ctx.recv("orders")

        yield app


def send(app: longcall.App, *args: str) -> Result:
    return CliRunner().invoke(main, ["runs", "send", "--database", app.url, "-o", "json", *args])


def test_send_keeps_the_message_for_the_run(app: longcall.App) -> None:
    run = app.submit_run("inbox")
    key = ["--idempotency-key", "k1"]
    sent = send(app, run.run_id, "orders", "--message", '{"n": 1}', *key)
    assert sent.exit_code == 0, sent.output
    assert json.loads(sent.output) == {
        "runId": run.run_id,
        "topic": "orders",
        "seq": 1,
        "created": True,
    }
    again = send(app, run.run_id, "orders", "--message", '{"n": 1}', *key)
    assert again.exit_code == 0 and json.loads(again.output)["created"] is False
    done = app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED and done.result == {"n": 1}


def test_send_refusals_exit_with_their_codes(app: longcall.App) -> None:
    run = app.submit_run("inbox")
    assert send(app, "run-nope", "orders").exit_code == 3
    bad_json = send(app, run.run_id, "orders", "--message", "{nope")
    assert bad_json.exit_code == 2 and "--message is not valid JSON" in bad_json.output
    bad_topic = send(app, run.run_id, "a\tb")
    assert bad_topic.exit_code == 2 and "topic has a control character" in bad_topic.output
    app.cancel_run(run.run_id)
    finished = send(app, run.run_id, "orders")
    assert finished.exit_code == 5 and "cancelled" in finished.output


def value(app: longcall.App, *args: str) -> Result:
    return CliRunner().invoke(main, ["runs", "value", "--database", app.url, "-o", "json", *args])


def test_value_reads_what_the_run_published(app: longcall.App) -> None:
    @app.workflow("publisher")
    def publisher(ctx: TaskContext) -> None:
        ctx.set_event("status", {"stage": "packed"})

    run = app.submit_run("publisher")
    missing = value(app, run.run_id, "status")
    assert missing.exit_code == 3 and "published no value under 'status'" in missing.output
    app.continue_run(run.run_id)
    read = value(app, run.run_id, "status", "--wait", "5s")
    assert read.exit_code == 0, read.output
    assert json.loads(read.output) == {
        "runId": run.run_id,
        "key": "status",
        "value": {"stage": "packed"},
    }
    assert value(app, "run-nope", "status").exit_code == 3
    bad_key = value(app, run.run_id, "a\tb")
    assert bad_key.exit_code == 2 and "control character" in bad_key.output
    bad_wait = value(app, run.run_id, "status", "--wait", "soon")
    assert bad_wait.exit_code == 2 and "not a duration" in bad_wait.output
