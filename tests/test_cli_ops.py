"""The operator's commands: doctor, jobs extend, jobs watch, hooks rotate, and the exit codes."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import longcall
import sample_agent
from longcall.cli._doctor import mask_url
from longcall.cli.main import main
from longcall.core.clock import SystemClock
from longcall.store.queries import latest_version, migrations
from longcall.store.sqlite import SqliteStore

LONGCALL = str(Path(sys.executable).parent / "longcall")


@pytest.fixture(autouse=True)
def _no_longcall_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sets the LONGCALL_* variables it is about, and no others."""
    import os

    for name in [n for n in os.environ if n.startswith("LONGCALL_")]:
        monkeypatch.delenv(name)


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def checks(result: Result) -> dict[str, tuple[str, str]]:
    """The doctor's JSON rows as {check: (status, message)}."""
    return {row["check"]: (row["status"], row["message"]) for row in json.loads(result.output)}


def start_export(url: str, deadline: str | None = "10m") -> None:
    """Start the job export:csv on ``url`` (not attached to any session)."""
    with longcall.App(url) as app:

        @app.long_running(key="export:{fmt}", deadline=deadline)
        def export(fmt: str) -> str:
            """Exports."""
            return "started"

        export(fmt="csv")


# -- help ---------------------------------------------------------------------------------


def test_help_lists_every_exit_code() -> None:
    """`longcall --help` ends with the exit codes, one meaning each."""
    result = cli("--help")
    assert result.exit_code == 0
    epilog = result.output[result.output.index("Exit codes:") :]
    for code in range(6):
        assert f"\n    {code}  " in epilog


def test_bad_database_url_exits_2_with_the_reason(tmp_path: Path) -> None:
    """A database URL that cannot work is bad usage (2), said in one line."""
    result = cli("jobs", "list", "--database", "mysql://nope/db")
    assert result.exit_code == 2
    assert "unsupported database URL" in result.output


# -- doctor -------------------------------------------------------------------------------


def test_doctor_on_a_new_database_warns_about_webhooks_and_tokens(db_url: str) -> None:
    """A migrated database with nothing set up: ok rows, two warnings, exit 0."""
    result = cli("doctor", "--database", db_url, "-o", "json")
    assert result.exit_code == 0, result.output
    rows = checks(result)
    assert rows["database"][0] == "ok" and "from --database) is reachable" in rows["database"][1]
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgres"
    assert rows["schema"] == ("ok", f"version {latest_version(dialect)}, current")
    assert rows["settings"][0] == "ok"
    assert rows["webhooks"][0] == "warn" and "hooks add" in rows["webhooks"][1]
    assert rows["tokens"][0] == "warn" and "tokens create --admin" in rows["tokens"][1]
    assert rows["server extra"][0] in ("ok", "warn")


def test_doctor_all_ok_once_a_source_and_an_admin_token_exist(db_url: str) -> None:
    """With a webhook secret and an admin token every row is ok; a rotation is noted."""
    assert cli("hooks", "add", "batch", "--database", db_url).exit_code == 0
    assert cli("tokens", "create", "--user", "ana", "--database", db_url).exit_code == 0
    user_only = checks(cli("doctor", "--database", db_url, "-o", "json"))
    assert user_only["tokens"][0] == "warn" and "no admin token" in user_only["tokens"][1]
    assert cli("tokens", "create", "--admin", "--database", db_url).exit_code == 0
    assert cli("hooks", "rotate", "batch", "--database", db_url).exit_code == 0
    result = cli("doctor", "--database", db_url, "-o", "json")
    assert result.exit_code == 0, result.output
    rows = checks(result)
    assert rows["webhooks batch"] == (
        "ok",
        "2 active secrets (a rotation in progress: retire the old one once the sender uses "
        "the new)",
    )
    assert rows["tokens"] == ("ok", "2 active token(s), 1 admin")
    assert "whsec_" not in result.output and "lc_" not in result.output


def test_doctor_shows_settings_with_the_password_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set LONGCALL_* variables are listed, passwords masked, bad values fail, typos warn."""
    url = f"sqlite:///{tmp_path / 'doc.db'}"
    longcall.App(url).close()
    monkeypatch.setenv("LONGCALL_TEST_PG", "postgresql://admin:hunter2@db.example/x")
    monkeypatch.setenv("LONGCALL_WEBHOOK_TOLERANCE", "10m")
    monkeypatch.setenv("LONGCALL_PORT", "eighty")
    monkeypatch.setenv("LONGCALL_DATABSE_URL", "sqlite:///typo.db")
    result = cli("doctor", "--database", url, "-o", "json")
    assert result.exit_code == 1
    assert "hunter2" not in result.output
    rows = checks(result)
    assert rows["LONGCALL_TEST_PG"][0] == "ok"
    assert "postgresql://admin:***@db.example/x" in rows["LONGCALL_TEST_PG"][1]
    assert rows["LONGCALL_WEBHOOK_TOLERANCE"] == (
        "ok",
        "10m: how old a signed delivery `serve` still accepts",
    )
    assert rows["LONGCALL_PORT"][0] == "fail"
    assert rows["LONGCALL_DATABSE_URL"] == ("warn", "longcall reads no such setting (a typo?)")
    table = cli("doctor", "--database", url, "-o", "table")
    assert "LONGCALL_PORT" in table.output and "fail" in table.output


def test_doctor_outdated_schema_fails_naming_the_pending_migrations(tmp_path: Path) -> None:
    """A schema-1 database fails the schema row (exit 1), naming what is pending; untouched."""
    path = tmp_path / "old.db"
    store = SqliteStore(path, SystemClock())
    first = migrations("sqlite")[0]
    assert store._apply(first.sql, first.version, first.name, from_version=None)
    store.close()
    result = cli("doctor", "--database", f"sqlite:///{path}", "-o", "json")
    assert result.exit_code == 1
    status, message = checks(result)["schema"]
    pending = ", ".join(str(v) for v in range(2, latest_version("sqlite") + 1))
    assert status == "fail"
    assert f"version 1; migration(s) {pending} pending: run `longcall migrate`" == message
    with closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute("SELECT MAX(version) FROM lc_migrations").fetchone()[0] == 1


def test_doctor_fails_a_secret_that_cannot_verify(tmp_path: Path) -> None:
    """A secret too short to verify anything (written around the CLI) fails its row."""
    pytest.importorskip("standardwebhooks")
    path = tmp_path / "doc.db"
    longcall.App(f"sqlite:///{path}").close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO lc_webhook_secrets (source, secret_id, secret, created_at) "
            "VALUES ('legacy', 'sec_old', 'whsec_c2hvcnQ=', 1)"
        )
    result = cli("doctor", "--database", f"sqlite:///{path}", "-o", "json")
    assert result.exit_code == 1
    status, message = checks(result)["webhooks legacy"]
    assert status == "fail" and "hooks rotate legacy --retire-others" in message
    assert "whsec_" not in result.output


def test_doctor_unreachable_database_exits_4_and_creates_nothing(tmp_path: Path) -> None:
    """A SQLite file that does not exist is reported (exit 4), not created."""
    path = tmp_path / "missing.db"
    result = cli("doctor", "--database", f"sqlite:///{path}", "-o", "json")
    assert result.exit_code == 4
    status, message = checks(result)["database"]
    assert status == "fail" and "no such file" in message
    assert not path.exists()


def test_doctor_json_is_the_default_off_a_terminal(tmp_path: Path) -> None:
    """Without -o, output that is not a terminal is the JSON list of rows."""
    url = f"sqlite:///{tmp_path / 'doc.db'}"
    longcall.App(url).close()
    rows = json.loads(cli("doctor", "--database", url).output)
    assert all(set(row) == {"check", "status", "message"} for row in rows)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:////abs/path.db", "sqlite:////abs/path.db"),
        (
            "postgresql://u:pw@h:5432/db?sslmode=require",
            "postgresql://u:***@h:5432/db?sslmode=require",
        ),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?password=pw&x=1", "postgresql://u@h/db?password=***&x=1"),
        ("postgresql://h/db", "postgresql://h/db"),
    ],
)
def test_mask_url_hides_passwords_and_nothing_else(url: str, shown: str) -> None:
    """Passwords in the authority or a password= option become ***; the rest stays as written."""
    assert mask_url(url) == shown


# -- jobs extend --------------------------------------------------------------------------


def test_jobs_extend_moves_the_deadline_from_now(db_url: str) -> None:
    """extend --deadline 45m sets the deadline 45 minutes from now and logs it; 5400 is
    seconds."""
    start_export(db_url)
    before = time.time()
    result = cli(
        "jobs", "extend", "export:csv", "--deadline", "45m", "--database", db_url, "-o", "json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["changed"] is True
    deadline = dt.datetime.fromisoformat(data["job"]["deadlineAt"]).timestamp()
    assert before + 2700 - 5 <= deadline <= time.time() + 2700 + 5
    with longcall.App(db_url) as app:
        assert app.job_events("export:csv")[-1].kind == "extended"
    text = cli(
        "jobs", "extend", "export:csv", "--deadline", "1h30m", "--database", db_url, "-o", "table"
    )
    assert text.exit_code == 0 and "(in 90 minutes)" in text.output
    seconds = cli(
        "jobs", "extend", "export:csv", "--deadline", "5400", "--database", db_url, "-o", "table"
    )
    assert seconds.exit_code == 0 and "(in 90 minutes)" in seconds.output  # plain seconds


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["export:csv", "--deadline", "soon"], 2, "not a duration"),
        (["export:csv", "--deadline", "0s"], 2, "more than 0 seconds"),
        (["export:csv"], 2, "Missing option '--deadline'"),
        (["nope", "--deadline", "1h"], 3, "no job with id 'nope'"),
    ],
)
def test_jobs_extend_bad_input_changes_nothing(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    """A bad duration or an unknown job exits with its code and leaves the deadline alone."""
    url = f"sqlite:///{tmp_path / 'ext.db'}"
    start_export(url)
    with longcall.App(url) as app:
        before = app.get_job("export:csv"), app.job_events("export:csv")
    result = cli("jobs", "extend", *args, "--database", url)
    assert result.exit_code == code and message in result.output
    with longcall.App(url) as app:
        assert (app.get_job("export:csv"), app.job_events("export:csv")) == before


def test_jobs_extend_a_finished_job_exits_5(tmp_path: Path) -> None:
    """A finished job has no deadline left to move: exit 5, job unchanged."""
    url = f"sqlite:///{tmp_path / 'ext.db'}"
    start_export(url)
    with longcall.App(url) as app:
        app.complete("export:csv", {"rows": 1})
        before = app.get_job("export:csv")
    result = cli("jobs", "extend", "export:csv", "--deadline", "1h", "--database", url)
    assert result.exit_code == 5 and "has succeeded already" in result.output
    with longcall.App(url) as app:
        assert app.get_job("export:csv") == before


# -- hooks rotate -------------------------------------------------------------------------


def test_hooks_rotate_adds_a_secret_and_keeps_the_old_one(tmp_path: Path) -> None:
    """rotate prints a new secret; the old one still verifies until retired."""
    pytest.importorskip("standardwebhooks")
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    longcall.App(url).close()
    old = json.loads(cli("hooks", "add", "batch", "--database", url, "-o", "json").output)
    rotated = cli("hooks", "rotate", "batch", "--database", url, "-o", "json")
    assert rotated.exit_code == 0, rotated.output
    new = json.loads(rotated.output)
    assert new["secret"].startswith("whsec_") and new["secret"] != old["secret"]
    assert new["stillValid"] == [old["secretId"]] and new["retired"] == []
    with longcall.App(url) as app:
        assert [s.secret for s in app.store.hook_secrets("batch")] == [old["secret"], new["secret"]]
    text = cli("hooks", "rotate", "batch", "--database", url, "-o", "table")
    assert f"longcall hooks retire batch {old['secretId']}" in text.output


def test_hooks_rotate_retire_others_leaves_only_the_new_secret(tmp_path: Path) -> None:
    """--retire-others retires every older secret in the same command."""
    pytest.importorskip("standardwebhooks")
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    longcall.App(url).close()
    first = json.loads(cli("hooks", "add", "batch", "--database", url, "-o", "json").output)
    second = json.loads(cli("hooks", "rotate", "batch", "--database", url, "-o", "json").output)
    result = cli("hooks", "rotate", "batch", "--retire-others", "--database", url, "-o", "json")
    assert result.exit_code == 0, result.output
    third = json.loads(result.output)
    assert third["retired"] == [first["secretId"], second["secretId"]]
    assert third["stillValid"] == []
    with longcall.App(url) as app:
        assert [s.secret_id for s in app.store.hook_secrets("batch")] == [third["secretId"]]


def test_hooks_rotate_an_unknown_source_exits_3_and_creates_nothing(tmp_path: Path) -> None:
    """Rotating a source that has no secret is a typo, not a new source: exit 3, no secret."""
    pytest.importorskip("standardwebhooks")
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    longcall.App(url).close()
    result = cli("hooks", "rotate", "bacth", "--database", url)
    assert result.exit_code == 3 and "longcall hooks add bacth" in result.output
    with longcall.App(url) as app:
        assert app.store.hook_secrets() == []


# -- jobs watch ---------------------------------------------------------------------------


def watch(*args: str, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [LONGCALL, "jobs", "watch", *args, "--database", url, "-o", "json", "--interval", "0.1s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(proc: subprocess.Popen[str], wanted: Any, lines: list[dict[str, Any]]) -> None:
    """Read JSON lines from ``proc`` into ``lines`` until one satisfies ``wanted``."""
    assert proc.stdout is not None
    for raw in proc.stdout:
        lines.append(json.loads(raw))
        if wanted(lines[-1]):
            return
    raise AssertionError(f"the watch ended first; it printed {lines}")


def watch_while_completing(
    url: str, *args: str, first: Any
) -> tuple[list[dict[str, Any]], str, int]:
    """Watch with ARGS until a line satisfies ``first``, complete export:csv, and read to the
    end: every JSON line, stderr and the exit code."""
    proc = watch(*args, url=url)
    try:
        lines: list[dict[str, Any]] = []
        read_until(proc, first, lines)
        with longcall.App(url) as app:
            app.complete("export:csv", {"rows": 2})
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return lines + [json.loads(raw) for raw in out.splitlines()], err, proc.returncode


def test_jobs_watch_follows_one_job_until_it_is_delivered(db_url: str) -> None:
    """watch JOB prints each log entry and state change as the job finishes, then exits 0."""
    with longcall.App(db_url) as app:
        agent = sample_agent.ask_for_export(app, user_id="ana", session_id="s1")
        anas = longcall.job_id_for("export:csv", "ana")
        proc = watch(anas, "--timeout", "60s", url=db_url)
        try:
            lines: list[dict[str, Any]] = []
            read_until(proc, lambda line: line["type"] == "job", lines)
            assert (lines[-1]["state"], lines[-1]["delivery"]) == ("started", "none")
            completer = threading.Thread(target=app.complete, args=(anas, {"rows": 3}))
            completer.start()
            read_until(proc, lambda line: line["type"] == "job", lines)
            completer.join()
            assert (lines[-1]["state"], lines[-1]["delivery"]) == ("succeeded", "ready")
            assert asyncio.run(app.deliverer(agent).run_once()) == 1
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    lines += [json.loads(raw) for raw in out.splitlines()]
    events = [line for line in lines if line["type"] == "event"]
    assert [(e["kind"], e["data"]) for e in events] == [("succeeded", {"rows": 3})]
    states = [(line["state"], line["delivery"]) for line in lines if line["type"] == "job"]
    assert states == [("started", "none"), ("succeeded", "ready"), ("succeeded", "delivered")]


def test_jobs_watch_all_prints_each_job_whose_row_changed(tmp_path: Path) -> None:
    """Without JOB_ID, watch prints a job again when its row changes, even leaving --state."""
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    start_export(url)
    lines, err, code = watch_while_completing(
        url,
        "--state",
        "started",
        "--timeout",
        "4s",
        first=lambda line: line["jobId"] == "export:csv",
    )
    assert code == 0, err
    assert [(line["jobId"], line["state"]) for line in lines] == [
        ("export:csv", "started"),
        ("export:csv", "succeeded"),
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope"], 3, "no job with id 'nope'"),
        (["export:csv", "--timeout", "0.3s"], 1, "export:csv is not done after 0.3 s"),
        (["export:csv", "--state", "started"], 2, "filter the jobs without a JOB_ID"),
        (["--interval", "often"], 2, "not a duration"),
    ],
)
def test_jobs_watch_bad_input_and_timeouts_exit_with_their_code(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    """An unknown job exits 3, a job not done by --timeout 1, bad options 2; nothing changes."""
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    start_export(url)
    with longcall.App(url) as app:
        before = app.get_job("export:csv")
    result = cli("jobs", "watch", "--interval", "0.1s", *args, "--database", url)
    assert result.exit_code == code, result.output
    assert message in result.output
    with longcall.App(url) as app:
        assert app.get_job("export:csv") == before


def test_jobs_watch_of_a_job_with_no_session_says_why_and_ends_when_it_finishes(
    tmp_path: Path,
) -> None:
    """watch JOB on a job no session is attached to says so once on stderr, then exits 1 as
    soon as the job finishes (at once when it had finished already)."""
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    start_export(url)
    lines, err, code = watch_while_completing(
        url, "export:csv", "--timeout", "60s", first=lambda line: line["type"] == "job"
    )
    assert code == 1, err
    assert err.splitlines() == [
        "export:csv has no session, so no agent will be given its result unless it is "
        "attached; the watch ends when the job finishes (exit 1 if still unattached)"
    ]
    states = [(line["state"], line["delivery"]) for line in lines if line["type"] == "job"]
    assert states == [("started", "none"), ("succeeded", "none")]

    again = cli("jobs", "watch", "export:csv", "--database", url, "-o", "table")
    assert again.exit_code == 1
    assert again.output.count("has no session") == 1 and "succeeded, delivery none" in again.output


def test_jobs_watch_until_finished_stops_without_a_delivery(tmp_path: Path) -> None:
    """--until finished ends the watch of a finished job no agent will hear of, exit 0."""
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    start_export(url)
    with longcall.App(url) as app:
        app.fail("export:csv", "disk full")
    result = cli(
        "jobs", "watch", "export:csv", "--until", "finished", "--database", url, "-o", "table"
    )
    assert result.exit_code == 0, result.output
    assert "#1 failed" in result.output and "failed, delivery none" in result.output
