"""``longcall runs stream``: a run's stream printed from the start, as text or JSON lines,
resumed with --after, and its exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

import longcall
from longcall import RunStatus, TaskContext
from longcall.cli.main import main


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with longcall.App(sqlite_url) as app:

        @app.workflow("talker")
        def talker(ctx: TaskContext) -> None:
            for token in ("Hello", ", ", "world"):
                ctx.stream("tokens", token)
            ctx.stream("tokens", {"done": True})

        @app.workflow("napper")
        def napper(ctx: TaskContext) -> None:
            ctx.sleep(3600)

        yield app


def stream(app: longcall.App, *args: str) -> Result:
    return CliRunner().invoke(main, ["runs", "stream", "--database", app.url, *args])


def test_stream_prints_text_tokens_joined_and_json_lines(app: longcall.App) -> None:
    run = app.submit_run("talker")
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED
    text = stream(app, "-o", "table", run.run_id, "tokens")
    assert text.exit_code == 0, text.output
    assert text.output == 'Hello, world\n{"done": true}\n'
    lines = stream(app, "-o", "json", "--after", "2", run.run_id, "tokens")
    assert lines.exit_code == 0, lines.output
    assert [json.loads(line) for line in lines.output.splitlines()] == [
        {"seq": 3, "value": "world", "attempt": None},
        {"seq": 4, "value": {"done": True}, "attempt": None},
    ]


def test_stream_refusals_exit_with_their_codes(app: longcall.App) -> None:
    run = app.submit_run("napper")
    unknown = stream(app, "no-such-run", "tokens")
    assert unknown.exit_code == 3 and "no-such-run" in unknown.output
    bad_key = stream(app, run.run_id, "x" * 201)
    assert bad_key.exit_code == 2 and "key" in bad_key.output
    waited = stream(app, "--timeout", "200ms", run.run_id, "tokens")
    assert waited.exit_code == 1 and "tokens" in waited.output
