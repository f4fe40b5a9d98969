"""The ``longcall`` command: the demo as a real subprocess, and the job commands."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

import longcall
import sample_agent
from longcall.cli._demo_cast import EMEA
from longcall.cli.main import main
from longcall.core.clock import SystemClock
from longcall.core.jobs import job_id_for
from longcall.store.queries import latest_version, migrations
from longcall.store.sqlite import SqliteStore


def test_in_process_demo_runs_the_worked_example_and_exits_zero() -> None:
    """`longcall demo --in-process` plays the fake-clock timeline, checks every step, exits 0."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "longcall"), "demo", "--in-process"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": ""},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    order = ["10:00:00", "10:05:00", "10:19:00", "10:19:03", "10:21:00", "11:07:00"]
    positions = [out.index(stamp) for stamp in order]
    assert positions == sorted(positions)
    assert "calls start_sales_report(quarter='2026-Q3', region='EMEA')" in out
    assert f"'status': 'pending', 'jobId': '{EMEA}'" in out
    assert "You have 12 vacation days left" in out
    assert "rowCount 48213" in out
    assert "No result within 45 minutes" in out
    assert out.count("✓") == 12 and "✗" not in out
    assert "all 12 checks passed" in out


def test_migrate_then_check(tmp_path: Path) -> None:
    """`migrate` creates the schema once; `migrate --check` then passes."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    check = runner.invoke(main, ["migrate", "--database", url, "--check"])
    assert check.exit_code == 1 and "schema version 0" in check.output
    first = runner.invoke(main, ["migrate", "--database", url])
    latest = latest_version("sqlite")
    assert first.exit_code == 0 and f"created the schema; schema version {latest}" in first.output
    second = runner.invoke(main, ["migrate", "--database", url])
    assert second.exit_code == 0 and "nothing to do" in second.output
    assert runner.invoke(main, ["migrate", "--database", url, "--check"]).exit_code == 0


def test_job_commands_complete_show_and_list(tmp_path: Path) -> None:
    """Jobs can be listed, shown, progressed and completed from the CLI, with JSON output."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with longcall.App(url) as app:

        @app.long_running(key="export:{fmt}")
        def export(fmt: str) -> str:
            """Exports."""
            return "started"

        export(fmt="csv")
    runner = CliRunner()
    listed = runner.invoke(main, ["jobs", "list", "--database", url, "-o", "json"])
    assert listed.exit_code == 0
    assert [j["jobId"] for j in json.loads(listed.output)] == ["export:csv"]
    progressed = runner.invoke(
        main, ["jobs", "progress", "export:csv", "--database", url, "--data", '{"pct": 50}']
    )
    assert progressed.exit_code == 0, progressed.output
    done = runner.invoke(
        main,
        [
            "jobs",
            "complete",
            "export:csv",
            "--database",
            url,
            "--result",
            '{"rows": 7}',
            "-o",
            "json",
        ],
    )
    assert done.exit_code == 0 and json.loads(done.output)["changed"] is True
    again = runner.invoke(
        main, ["jobs", "complete", "export:csv", "--database", url, "--result", "{}", "--strict"]
    )
    assert again.exit_code == 5
    shown = json.loads(
        runner.invoke(main, ["jobs", "show", "export:csv", "--database", url, "-o", "json"]).output
    )
    assert shown["state"] == "succeeded" and shown["result"] == {"rows": 7}
    assert [e["kind"] for e in shown["events"]] == ["progress", "succeeded", "ignored"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["jobs", "show", "nope"], 3, "no job with id 'nope'"),
        (["jobs", "complete", "nope", "--result", "{x"], 2, "not valid JSON"),
        (["jobs", "list", "--state", "bogus"], 2, "Invalid value for '--state'"),
    ],
)
def test_bad_input_gets_a_clear_error_and_its_exit_code(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    """Unknown jobs exit 3, bad JSON and bad options exit 2, each with a message saying what."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    longcall.App(url).close()
    result = CliRunner().invoke(main, [*args, "--database", url])
    assert result.exit_code == code
    assert message in result.output


def test_unmigrated_database_exits_4_naming_migrate(tmp_path: Path) -> None:
    """A command on a database without the schema exits 4 and says to run `longcall migrate`."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = CliRunner().invoke(main, ["jobs", "list", "--database", url])
    assert result.exit_code == 4
    assert "longcall migrate" in result.output


def test_worker_command_delivers_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`longcall worker --app … --agent …` resumes a completed job and exits 0 on SIGTERM."""
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    env = sample_agent.install(tmp_path, url)
    with longcall.App(url) as app:
        agent = sample_agent.ask_for_export(app, user_id="u", session_id="s")
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "longcall"),
                "worker",
                "--app",
                "sample_agent:app",
                "--agent",
                "sample_agent:runner",
                "--poll",
                "0.1s",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            export_csv = job_id_for("export:csv", "u")  # user u's job
            app.complete(export_csv, {"rows": 3})
            deadline = time.monotonic() + 30
            while app.get_job(export_csv).delivery is not longcall.Delivery.DELIVERED:
                assert time.monotonic() < deadline, "the worker never delivered the job"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        replies = [e.text for e in asyncio_history(agent, "s") if e.text]
        assert replies[-1] == "export has finished: rows 3."


def asyncio_history(agent: longcall.ScriptedAgent, session_id: str) -> list[longcall.AgentEvent]:
    """The scripted agent's session history, from sync code."""
    return asyncio.run(agent.history(session_id))


def test_migrate_upgrades_an_older_schema_step_by_step(tmp_path: Path) -> None:
    """A database at schema 1 is upgraded by the missing migrations, keeping its jobs."""
    path = tmp_path / "old.db"
    store = SqliteStore(path, SystemClock())
    first = migrations("sqlite")[0]
    assert store._apply(first.sql, first.version, first.name, from_version=None)
    store.close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO lc_jobs (job_id, tool_name, created_at, updated_at) "
            "VALUES ('old-job', 'export', 1, 1)"
        )
    outdated = CliRunner().invoke(main, ["jobs", "list", "--database", f"sqlite:///{path}"])
    assert outdated.exit_code == 4 and "longcall migrate" in outdated.output
    result = CliRunner().invoke(main, ["migrate", "--database", f"sqlite:///{path}"])
    assert result.exit_code == 0
    latest = latest_version("sqlite")
    steps = ", ".join(str(v) for v in range(2, latest + 1))
    assert f"applied migration(s) {steps}; schema version {latest}" in result.output
    with longcall.App(f"sqlite:///{path}", migrate=False) as app:
        assert [j.job_id for j in app.list_jobs()] == ["old-job"]
