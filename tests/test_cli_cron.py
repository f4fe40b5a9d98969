"""``longcall cron``: add (with --app or --no-check), list, show, pause, unpause, trigger, rm and
preview, with exit codes.

``add --app test_cli_cron:APP`` loads this module's ``APP``, which each call sets to a new App
on the test's database (the command closes the App it loaded).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner, Result

import longcall
from longcall.cli.main import main
from procs import sql_rows

APP: longcall.App | None = None


class Report(pydantic.BaseModel):
    region: str


def build(url: str) -> longcall.App:
    """An App with report (takes a Report) and ping (takes nothing)."""
    app = longcall.App(url)

    @app.workflow("report")
    def report(order: Report) -> str:
        return order.region

    @app.workflow("ping")
    def ping(_: None) -> str:
        return "pong"

    return app


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with build(sqlite_url) as app:
        yield app


def cli(app: longcall.App, *args: str) -> Result:
    """``longcall cron ARGS`` on the app's database (``--app`` for add), JSON out."""
    global APP
    if args[0] == "add" and "--no-check" not in args:
        APP = build(app.url)
        extra = ["--app", f"{__name__}:APP"]
    else:
        extra = ["--database", app.url]
    return CliRunner().invoke(main, ["cron", *args, *extra, "-o", "json"])


def added(app: longcall.App, name: str, *args: str) -> dict[str, Any]:
    got = cli(app, "add", name, "ping", "*/5 * * * *", *args)
    assert got.exit_code == 0, got.output
    return dict(json.loads(got.stdout))


def stored(app: longcall.App) -> list[Any]:
    return [
        sql_rows(app.url, f"SELECT * FROM {table} ORDER BY 1, 2")
        for table in ("lc_cron", "lc_cron_fires", "lc_runs")
    ]


def test_preview_needs_no_database_and_names_a_bad_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next fire times in the zone and in UTC, across Berlin's spring change; a bad
    expression or zone exits 2 naming it; no database is opened or made."""
    runner = CliRunner(env={"LONGCALL_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"})
    monkeypatch.chdir(tmp_path)
    args = ["cron", "preview", "30 2 * * *", "-z", "Europe/Berlin", "--after", "2025-03-29T12:00Z"]
    got = runner.invoke(main, [*args, "-n", "3", "-o", "json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout) == [
        {"local": "2025-03-30T03:00:00+02:00", "utc": "2025-03-30T01:00:00+00:00"},
        {"local": "2025-03-31T02:30:00+02:00", "utc": "2025-03-31T00:30:00+00:00"},
        {"local": "2025-04-01T02:30:00+02:00", "utc": "2025-04-01T00:30:00+00:00"},
    ]
    naive = runner.invoke(main, [*args[:-1], "2025-03-30T01:00", "-n", "1", "-o", "table"])
    assert naive.output == "2025-03-30T03:00:00+02:00  (2025-03-30T01:00:00+00:00)\n"
    now = runner.invoke(main, ["cron", "preview", "@hourly", "-o", "json"])
    assert now.exit_code == 0 and len(json.loads(now.stdout)) == 5

    bad = runner.invoke(main, ["cron", "preview", "61 * * * *"])
    assert bad.exit_code == 2 and "error: EXPRESSION: '61 * * * *'" in bad.output
    zone = runner.invoke(main, ["cron", "preview", "@daily", "--timezone", "Mars/Base"])
    assert zone.exit_code == 2
    assert "error: --timezone: unknown time zone 'Mars/Base'" in zone.output
    after = runner.invoke(main, ["cron", "preview", "@daily", "--after", "soon"])
    assert after.exit_code == 2 and "not an ISO 8601 time" in after.output
    assert list(tmp_path.iterdir()) == []


def test_add_checks_the_workflow_expression_and_input_and_stores_nothing_when_wrong(
    app: longcall.App,
) -> None:
    """add stores the schedule with its checked input; an unknown workflow exits 3, a bad
    expression or zone or input 2, a taken name 5, and none of them stores anything."""
    got = cli(
        app,
        "add",
        "emea",
        "report",
        "30 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--input",
        '{"region": "emea"}',
        "--concurrency",
        "queue",
        "--misfire",
        "catch_up",
        "--catch-up-max",
        "3",
        "--user",
        "alice",
    )
    assert got.exit_code == 0, got.output
    made = json.loads(got.stdout)
    assert made["cronId"].startswith("cron-") and made["name"] == "emea"
    cron = app.crons.get(made["cronId"])
    assert (cron.workflow_id, cron.expression, cron.timezone) == (
        "report",
        "30 2 * * *",
        "Europe/Berlin",
    )
    assert (cron.concurrency_policy.value, cron.misfire_policy.value, cron.catch_up_max) == (
        "queue",
        "catch_up",
        3,
    )
    assert (cron.input, cron.user_id, cron.paused) == ({"region": "emea"}, "alice", False)

    before = stored(app)
    for args, code, text in [
        (("x", "nope", "@daily"), 3, "no workflow registered as 'nope'"),
        (("x", "nope", "@often"), 2, "error: EXPRESSION: unknown alias '@often'"),
        (("x", "ping", "@daily", "-z", "Nowhere"), 2, "error: --timezone: unknown time zone"),
        (("x", "report", "@daily", "--input", '{"rows": 1}'), 2, "--input does not fit 'report'"),
        (("x", "ping", "@daily", "--input", "{no"), 2, "--input is not valid JSON"),
        (("x", "ping", "@daily", "--concurrency", "maybe"), 2, "'maybe' is not one of"),
        (("emea", "ping", "@daily"), 5, "the name 'emea' is taken"),
        ((" ", "ping", "@daily"), 2, "error: NAME: give the schedule a non-empty name"),
    ]:
        refused = cli(app, "add", *args)
        assert refused.exit_code == code, (args, refused.output)
        assert text in refused.output, refused.output
    neither = CliRunner().invoke(main, ["cron", "add", "x", "ping", "@daily"])
    assert neither.exit_code == 2 and "give --app" in neither.output
    not_app = CliRunner().invoke(
        main, ["cron", "add", "x", "ping", "@daily", "--app", "json:dumps"]
    )
    assert not_app.exit_code == 2 and "not a longcall.App" in not_app.output
    assert stored(app) == before

    unchecked = cli(app, "add", "elsewhere", "not-here", "@daily", "--no-check", "--paused")
    assert unchecked.exit_code == 0, unchecked.output
    assert json.loads(unchecked.stdout)["workflowId"] == "not-here"
    assert app.crons.get_by_name("elsewhere").paused is True


def test_list_and_show_tell_what_a_schedule_does(app: longcall.App) -> None:
    """list by name with filters and active runs; show by id or name with the next fire times
    and the latest occurrences; an unknown schedule exits 3."""
    first = added(app, "b-first")
    added(app, "a-paused", "--paused")
    cli(app, "add", "c-report", "report", "@hourly", "--input", '{"region": "us"}')
    assert cli(app, "trigger", "b-first").exit_code == 0

    def names(*args: str) -> list[str]:
        got = cli(app, "list", *args)
        assert got.exit_code == 0, got.output
        return [c["name"] for c in json.loads(got.stdout)]

    assert names() == ["a-paused", "b-first", "c-report"]
    assert names("--paused") == ["a-paused"]
    assert names("--active", "--workflow", "ping") == ["b-first"]
    listed = json.loads(cli(app, "list", "--workflow", "ping", "--active").stdout)
    assert (listed[0]["activeRunCount"], listed[0]["executionCount"]) == (1, 1)

    by_name = json.loads(cli(app, "show", "b-first").stdout)
    by_id = json.loads(cli(app, "show", first["cronId"]).stdout)
    assert by_name == by_id
    assert by_name["activeRunCount"] == 1 and len(by_name["nextFireTimes"]) == 5
    assert [f["outcome"] for f in by_name["recentFires"]] == ["triggered"]
    assert by_name["nextFireTimes"][0]["utc"].endswith(":00+00:00")

    wide = CliRunner(env={"COLUMNS": "200"})  # rich wraps tables to the terminal's width
    table = wide.invoke(main, ["cron", "show", "b-first", "--database", app.url, "-o", "table"])
    assert table.exit_code == 0
    assert "*/5 * * * *" in table.output and "1 started, 1 active" in table.output
    assert "triggered" in table.output
    rows = wide.invoke(main, ["cron", "list", "--database", app.url, "-o", "table"])
    assert rows.exit_code == 0 and "c-report" in rows.output and "@hourly" in rows.output
    missing = cli(app, "show", "nope")
    assert missing.exit_code == 3 and "no cron schedule with id 'nope'" in missing.output


def test_pause_unpause_trigger_and_rm(app: longcall.App) -> None:
    """pause and unpause flip the schedule; trigger starts a run, then exits 5 while that run
    is active unless --force; rm deletes it (its runs stay) and exits 3 the second time."""
    added(app, "nightly")
    paused = cli(app, "pause", "nightly")
    assert paused.exit_code == 0 and json.loads(paused.stdout)["paused"] is True
    assert app.crons.get_by_name("nightly").paused is True
    unpaused = cli(app, "unpause", "nightly")
    assert unpaused.exit_code == 0 and json.loads(unpaused.stdout)["paused"] is False
    paused_again = cli(app, "pause", "nightly")
    assert paused_again.exit_code == 0 and json.loads(paused_again.stdout)["paused"] is True
    old_name = cli(app, "resume", "nightly")  # the old name, for one release
    assert old_name.exit_code == 0 and json.loads(old_name.stdout)["paused"] is False
    assert "deprecated" in old_name.stderr and "cron unpause" in old_name.stderr

    fired = cli(app, "trigger", "nightly")
    assert fired.exit_code == 0, fired.output
    run_id = json.loads(fired.stdout)["runId"]
    assert app.store.get_run(run_id).status is longcall.RunStatus.QUEUED
    skipped = cli(app, "trigger", "nightly")
    assert skipped.exit_code == 5
    assert json.loads(skipped.stdout)["outcome"] == "trigger_skipped"
    forced = cli(app, "trigger", "nightly", "--force")
    assert forced.exit_code == 0 and json.loads(forced.stdout)["outcome"] == "triggered"

    gone = cli(app, "rm", "nightly")
    assert gone.exit_code == 0, gone.output
    assert cli(app, "rm", "nightly").exit_code == 3
    assert cli(app, "pause", "nightly").exit_code == 3
    assert cli(app, "trigger", "nightly").exit_code == 3
    assert app.store.get_run(run_id).status is longcall.RunStatus.QUEUED


def test_a_database_without_the_schema_exits_4(tmp_path: Path) -> None:
    """Commands on a database longcall has not migrated exit 4; preview still works."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    for args in (["list"], ["show", "x"], ["add", "x", "ping", "@daily", "--no-check"]):
        got = CliRunner().invoke(main, ["cron", *args, "--database", url])
        assert got.exit_code == 4, (args, got.output)
