"""``longcall --log-format json``: one JSON object per log line, with the ids it is about."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from longcall.logs import JsonFormatter, about

SRC = str(Path(__file__).resolve().parents[1] / "src")

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from longcall.cli.main import main
    from longcall.logs import about

    main(sys.argv[1:], standalone_mode=False)
    log = logging.getLogger("longcall.delivery")
    log.warning("delivery of job %s failed", "job-1", extra=about(job_id="job-1", session_id="s"))
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("run %s failed", "run-1", extra=about(run_id="run-1"))
    """
)


def _lines(args: list[str], sqlite_url: str, **env: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args, "migrate", "--database", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", **env},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stderr.splitlines()]


def test_log_format_json_prints_one_object_per_record(sqlite_url: str) -> None:
    """Each record is one JSON line: time, level, logger, message, its ids, the exception."""
    warning, error = _lines(["--log-format", "json"], sqlite_url)
    assert warning["level"] == "WARNING" and warning["logger"] == "longcall.delivery"
    assert warning["message"] == "delivery of job job-1 failed"
    assert (warning["job_id"], warning["session_id"]) == ("job-1", "s")
    assert "run_id" not in warning and "exception" not in warning
    assert str(warning["time"]).endswith("+00:00")
    assert error["run_id"] == "run-1" and error["level"] == "ERROR"
    assert "ValueError: boom" in str(error["exception"])


def test_log_format_comes_from_the_environment(sqlite_url: str) -> None:
    """``LONGCALL_LOG_FORMAT=json`` does what ``--log-format json`` does."""
    lines = _lines([], sqlite_url, LONGCALL_LOG_FORMAT="json")
    assert [line["level"] for line in lines] == ["WARNING", "ERROR"]


def test_text_stays_the_default(sqlite_url: str) -> None:
    """Without the option, log lines are text as before."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "migrate", "--database", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert "WARNING longcall.delivery: delivery of job job-1 failed" in done.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stderr.splitlines()[0])


def test_about_names_the_job_and_its_session() -> None:
    """``about(job)`` gives the job's id and its session's; unknown ids are left out."""
    import longcall

    job = longcall.Job("job-1", "export", longcall.JobState.STARTED, session_id="s")
    assert about(job) == {"job_id": "job-1", "session_id": "s"}
    assert about(run_id="r") == {"run_id": "r"}
    record = logging.LogRecord("longcall", logging.INFO, __file__, 1, "hi", None, None)
    assert json.loads(JsonFormatter().format(record))["message"] == "hi"
