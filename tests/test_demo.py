"""`longcall demo` through the service: a real server, signed webhooks over HTTP, real time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import longcall
from longcall.cli._demo_cast import APAC, EMEA
from longcall.cli.main import main

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

LONGCALL = str(Path(sys.executable).parent / "longcall")
# Wide lines, so the timeline is not wrapped; no colours when the output is a pipe anyway.
ENV = {**os.environ, "COLUMNS": "250"}


def stamped(out: str, text: str) -> float:
    """The elapsed seconds on the first timeline line containing ``text``."""
    for line in out.splitlines():
        if text in line:
            match = re.match(r"\s*(\d+\.\d\d)s\s", line)
            assert match, f"no time on {line!r}"
            return float(match[1])
    raise AssertionError(f"no line with {text!r} in:\n{out}")


def test_demo_plays_the_example_through_the_service_and_exits_zero() -> None:
    """`longcall demo` runs every step over HTTP, in order, and exits 0 with all checks passed."""
    started = time.monotonic()
    proc = subprocess.run([LONGCALL, "demo"], capture_output=True, text=True, timeout=120, env=ENV)
    took = time.monotonic() - started
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert took < 30, f"the demo took {took:.1f} s"
    assert "all 16 checks passed" in out and out.count("✓") == 16 and "✗" not in out
    # the webhook, posted twice with one webhook-id: 2xx both times, applied once
    posts = re.findall(r"POST /v1/hooks/batch.*?\(webhook-id (msg_\w+)\)", out)
    assert len(posts) == 3 and posts[0] == posts[1] != posts[2]
    assert "service       200 applied" in out
    assert "service       200 duplicate" in out
    assert "✓ the job changed once: one completion in its log, one delivery recorded" in out
    # the resumed answer, then the deadline and the late result
    assert "rowCount 48213" in out
    assert "passed its deadline: expired" in out
    assert "No result within 3 seconds" in out
    assert "service       200 unchanged" in out
    order = [
        "GET /healthz 200",
        "Please build the sales report for 2026-Q3 EMEA",
        "How many vacation days",
        f"{EMEA} complete, signed",
        f"resumes session-ana-1 with {EMEA} (succeeded)",
        "POST /v1/hooks/batch again",
        "Also the sales report for 2026-Q3 APAC",
        f"{APAC} passed its deadline",
        f"{APAC} complete after all",
    ]
    times = [stamped(out, text) for text in order]
    assert times == sorted(times)
    assert times[3] - times[1] >= 0.9  # the build took its real second
    assert times[7] - times[6] >= 2.9  # and the deadline its three


def test_demo_serve_keeps_serving_until_sigterm(tmp_path: Path) -> None:
    """--serve prints the login page's URL and a token (never a URL with the token in it)
    that answers and logs in through the form; SIGTERM ends it with 0."""
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    proc = subprocess.Popen(
        [LONGCALL, "demo", "--serve", "--database", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stdout is not None
        dashboard, found, printed = None, None, []
        for line in proc.stdout:
            printed.append(line)
            dashboard = dashboard or re.search(r"dashboard +(http://127\.0\.0\.1:\d+)/login ", line)
            found = re.search(r"token +(lc_\S+) \(admin\)", line)
            if found:
                break
        assert dashboard, "no login page URL was printed"
        assert found, "no token was printed"
        assert not any("token=" in line for line in printed)
        base, token = dashboard[1], found[1]
        login = httpx.post(f"{base}/login", data={"token": token}, timeout=5)
        assert login.status_code == 303 and "longcall_login" in login.cookies
        page = httpx.get(f"{base}/", cookies=login.cookies, timeout=5)
        assert page.status_code == 200 and "<h1>Jobs</h1>" in page.text
        assert httpx.get(f"{base}/healthz", timeout=5).json() == {"status": "ok"}
        listed = httpx.get(
            f"{base}/v1/jobs", headers={"authorization": f"Bearer {token}"}, timeout=5
        )
        assert listed.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        rest, err = proc.communicate()
    assert "all 16 checks passed" in "".join(printed), err
    assert rest.strip().endswith("stopped")
    with longcall.App(url) as app:
        assert app.get_job(EMEA).delivery is longcall.Delivery.DELIVERED


def test_demo_without_the_server_extra_says_what_to_install() -> None:
    """Without starlette the demo names `pip install 'longcall[server]'` and exits 2."""
    code = (
        "import sys; sys.modules['starlette'] = None; "
        "from longcall.cli.main import main; main(['demo'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert proc.returncode == 2
    assert "pip install 'longcall[server]'" in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""


def test_demo_refuses_a_database_that_has_its_jobs_already(tmp_path: Path) -> None:
    """A database holding the demo's jobs is refused (exit 2) before anything is added."""
    url = f"sqlite:///{tmp_path / 'used.db'}"
    with longcall.App(url) as app:

        @app.long_running(key="report:{quarter}:{region}")
        def start_sales_report(quarter: str, region: str) -> str:
            """Starts a report."""
            return "started"

        ana = longcall.CallIds(user_id="ana")  # the demo's user: her namespace
        start_sales_report.invoke({"quarter": "2026-Q3", "region": "EMEA"}, ana)
    result = CliRunner().invoke(main, ["demo", "--database", url])
    assert result.exit_code == 2
    assert f"holds the demo's job {EMEA} already" in result.output
    with longcall.App(url) as app:
        assert app.store.hook_secrets() == [] and app.store.tokens() == []


def test_demo_in_process_cannot_serve() -> None:
    """--serve needs the server, so --in-process --serve is bad usage."""
    result = CliRunner().invoke(main, ["demo", "--in-process", "--serve"])
    assert result.exit_code == 2 and "drop --in-process" in result.output


def test_demo_on_google_adk_through_the_service() -> None:
    """`longcall demo --adk` plays the same checks with a real ADK Runner (offline model)."""
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    env = {k: v for k, v in ENV.items() if k != "GOOGLE_API_KEY"}
    proc = subprocess.run(
        [LONGCALL, "demo", "--adk"], capture_output=True, text=True, timeout=180, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "google-adk with the offline scripted model" in proc.stdout
    assert "all 16 checks passed" in proc.stdout
