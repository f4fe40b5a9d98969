"""`adk web` beside `longcall worker --adk`, driven in a real browser as a person does.

The google-adk guide's two-process deployment with ADK's own web UI: a person types into the dev UI,
the long-running tool answers that the report is being built, the report is completed from
the CLI, the worker resumes the session, and reloading the page shows the answer (ADK's UI
does not poll; the answer is in the session store).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")
import httpx

import longcall
from adk.servers import APP_NAME, BIN, process, wait_for, write_agents
from longcall import Delivery
from procs import free_port

ADK_WEB_USER = "user"  # the dev UI's user id unless the address names another


def test_adk_web_shows_the_resumed_answer_after_a_reload(tmp_path: Path, browser: Any) -> None:
    agents = write_agents(tmp_path)
    db_url = f"sqlite:///{tmp_path / 'longcall.db'}"
    sessions_uri = f"sqlite:///{tmp_path / 'sessions.db'}"
    env = {**os.environ, "LONGCALL_DATABASE_URL": db_url}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    plugin = ["--extra_plugins", "longcall.adk.LongcallPlugin"]
    web = [str(BIN / "adk"), "web", "--port", str(port), str(agents)]
    worker = [str(BIN / "longcall"), "worker", "--adk", str(agents), "--poll", "0.1s"]
    with (
        process([*web, "--session_service_uri", sessions_uri, *plugin], env, tmp_path / "web.log"),
        process(
            [*worker, "--session-service-uri", sessions_uri, *plugin], env, tmp_path / "worker.log"
        ),
    ):
        wait_for("adk web", lambda: httpx.get(f"{base}/list-apps").status_code == 200)
        page = browser.new_page()
        try:
            page.goto(f"{base}/dev-ui/?app={APP_NAME}")
            dismiss_telemetry_question(page)
            box = page.locator("textarea.chat-input-box")
            box.fill("Build the report for EMEA.")
            box.press("Enter")
            page.get_by_text("Report build started").first.wait_for(timeout=30_000)
            assert f"userId={ADK_WEB_USER}" in page.url and "session=" in page.url

            job_id = longcall.job_id_for("report:EMEA", ADK_WEB_USER)
            completed = subprocess.run(
                [str(BIN / "longcall"), "jobs", "complete", job_id, "--result", '{"rows": 3}'],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert completed.returncode == 0, completed.stderr
            # (Playwright's sync API runs an event loop here: the store, not App's sync API.)
            with longcall.App(db_url) as app:
                wait_for(
                    "the worker's delivery",
                    lambda: app.store.get_job(job_id).delivery is Delivery.DELIVERED,
                )
            page.reload()
            page.get_by_text("start_report has finished: rows 3.").wait_for(timeout=30_000)
            session_id = page.url.split("session=")[1].split("&")[0]
        finally:
            page.close()
        session = httpx.get(
            f"{base}/apps/{APP_NAME}/users/{ADK_WEB_USER}/sessions/{session_id}"
        ).json()
        statuses = [
            part["functionResponse"]["response"]["status"]
            for event in session["events"]
            for part in (event.get("content") or {}).get("parts") or []
            if "functionResponse" in part
        ]
        assert statuses == ["pending", "succeeded"]  # the answer went in once


def dismiss_telemetry_question(page: Any) -> None:
    """ADK's dev UI asks once whether to send usage data; decline when it asks."""
    decline = page.get_by_text("No Thanks")
    try:
        decline.click(timeout=5_000)
    except Exception as exc:
        if "Timeout" not in type(exc).__name__:
            raise
