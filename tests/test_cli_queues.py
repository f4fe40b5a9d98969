"""``longcall runs submit --queue/--priority/--dedupe-id`` and ``longcall queues``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

import longcall
from longcall.cli.main import main

APP: longcall.App | None = None  # what ``--app test_cli_queues:APP`` loads


def build(url: str) -> longcall.App:
    app = longcall.App(url)

    @app.workflow("echo")
    def echo(n: int) -> int:
        return n

    app.queue("emails", concurrency=5, worker_concurrency=2, rate="100/min", priority=True)
    app.queue("plain")
    return app


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with build(sqlite_url) as app:
        yield app


def submit(app: longcall.App, *args: str) -> Result:
    global APP
    APP = build(app.url)
    command = ["runs", "submit", "echo", "--input", "1", *args, "--app", f"{__name__}:APP"]
    return CliRunner().invoke(main, [*command, "-o", "json"])


def test_submit_to_a_queue_and_its_refusals(app: longcall.App) -> None:
    """--queue/--priority/--dedupe-id submit to the queue; a duplicate exits 5 naming the
    active run, an unknown queue 3, a priority the queue does not take 2; nothing queued."""
    got = submit(app, "--queue", "emails", "--priority", "-1", "--dedupe-id", "d1")
    assert got.exit_code == 0, got.output
    run = json.loads(got.stdout)["run"]
    assert (run["queue"], run["priority"], run["dedupeId"]) == ("emails", -1, "d1")
    duplicate = submit(app, "--queue", "emails", "--dedupe-id", "d1")
    assert duplicate.exit_code == 5 and run["runId"] in duplicate.output
    assert submit(app, "--queue", "nowhere").exit_code == 3
    refused = submit(app, "--queue", "plain", "--priority", "4")
    assert refused.exit_code == 2 and "priority=True" in refused.output
    assert len(app.list_runs()) == 1


def test_queues_lists_limits_and_depth(app: longcall.App) -> None:
    """``longcall queues`` shows each queue's limits, depth and oldest queued age."""
    for _ in range(2):
        assert submit(app, "--queue", "emails").exit_code == 0
    got = CliRunner().invoke(main, ["queues", "--database", app.url, "-o", "json"])
    assert got.exit_code == 0, got.output
    listed = {q["name"]: q for q in json.loads(got.stdout)}
    assert listed["emails"]["depth"] == 2
    assert listed["emails"]["limits"]["rate"] == "100/60s"
    assert listed["emails"]["oldestQueuedAgeSecs"] >= 0
    assert listed["plain"]["depth"] == 0
    table = CliRunner().invoke(main, ["queues", "--database", app.url, "-o", "table"])
    assert table.exit_code == 0 and "emails" in table.output and "plain" in table.output
