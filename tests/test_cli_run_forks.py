"""``longcall runs history`` and ``longcall runs fork``: JSON out, a table, and exit codes.

``fork --app test_cli_run_forks:APP`` loads this module's ``APP``, which each call sets to a
new App on the test's database (the command closes the App it loaded).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

import longcall
from longcall import RunStatus, TaskContext
from longcall.cli.main import main
from longcall.workflows import Append

APP: longcall.App | None = None
EXECUTED: Counter[int] = Counter()


def build(url: str) -> longcall.App:
    """An App whose workflow ``three`` calls a counted task three times."""
    app = longcall.App(url)

    @app.task(name="count")
    def count(i: int, ctx: TaskContext) -> int:
        EXECUTED[i] += 1
        ctx.set("seen", i)
        return i * 10

    @app.workflow("three", state={"seen": Append()})
    def three(start: int, ctx: TaskContext) -> list[int]:
        return [count(start + i) for i in range(3)]

    return app


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    EXECUTED.clear()
    with build(sqlite_url) as app:
        yield app


def cli(app: longcall.App, *args: str, with_app: bool = False) -> Result:
    global APP
    if with_app:
        APP = build(app.url)
        extra = ["--app", f"{__name__}:APP"]
    else:
        extra = ["--database", app.url]
    return CliRunner().invoke(main, ["runs", *args, *extra, "-o", "json"])


def test_history_lists_the_steps_and_with_the_app_their_state(app: longcall.App) -> None:
    """history gives each step's number, kind and output; with --app also the state."""
    run = app.run_workflow("three", 1)
    got = cli(app, "history", run.run_id)
    assert got.exit_code == 0, got.output
    steps = json.loads(got.stdout)["steps"]
    assert [(s["step"], s["kind"], s["output"], s["state"]) for s in steps] == [
        (1, "task", 10, None),
        (2, "task", 20, None),
        (3, "task", 30, None),
    ]
    with_state = cli(app, "history", run.run_id, with_app=True)
    assert with_state.exit_code == 0, with_state.output
    states = [s["state"] for s in json.loads(with_state.stdout)["steps"]]
    assert states == [{"seen": [1]}, {"seen": [1, 2]}, {"seen": [1, 2, 3]}]
    table = CliRunner().invoke(main, ["runs", "history", run.run_id, "--database", app.url])
    assert table.exit_code == 0 and "count" in table.output  # not a terminal: JSON too
    missing = cli(app, "history", "run-nope")
    assert missing.exit_code == 3 and "run-nope" in missing.output


def test_fork_queues_a_run_that_reuses_the_first_steps(app: longcall.App) -> None:
    """fork --from-step 3 queues a run with steps 1-2 copied; executing it runs only step 3;
    --input gives the fork a new input."""
    run = app.run_workflow("three", 1)
    got = cli(app, "fork", run.run_id, "--from-step", "3", with_app=True)
    assert got.exit_code == 0, got.output
    fork = json.loads(got.stdout)
    assert (fork["status"], fork["forkedFrom"], fork["forkedStep"]) == ("queued", run.run_id, 3)
    done = app.continue_run(fork["runId"])
    assert done.status is RunStatus.COMPLETED and done.result == [10, 20, 30]
    assert EXECUTED == {1: 1, 2: 1, 3: 2}

    fresh = cli(app, "fork", run.run_id, "--from-step", "1", "--input", "5", with_app=True)
    assert fresh.exit_code == 0, fresh.output
    assert app.continue_run(json.loads(fresh.stdout)["runId"]).result == [50, 60, 70]


def test_fork_refusals_exit_with_their_code_and_create_nothing(app: longcall.App) -> None:
    run = app.run_workflow("three", 1)
    before = len(app.list_runs())
    cases = [
        (("fork", "run-nope", "--from-step", "1"), 3),
        (("fork", run.run_id, "--from-step", "9"), 2),
        (("fork", run.run_id, "--from-step", "0"), 2),
        (("fork", run.run_id, "--from-step", "1", "--input", '"x"'), 2),
        (("fork", run.run_id, "--from-step", "1", "--input", "{bad"), 2),
    ]
    for args, code in cases:
        got = cli(app, *args, with_app=True)
        assert got.exit_code == code, (args, got.output)
    assert len(app.list_runs()) == before
