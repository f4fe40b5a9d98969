"""`adk api_server` beside `longcall worker --adk`: the two-process deployment, as real processes.

The unit tests at the end check how the worker builds ADK's apps and what it refuses.

ADK's own server takes the user's turns (``/run`` and ``/run_sse``) with longcall's plugin; a
``longcall worker --adk`` over the same agents folder and session store resumes the calls;
one job is completed with ``longcall jobs complete``, the other by a signed webhook to
``longcall serve``; the resumed answers are read back through ADK's server.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("google.adk", reason="the adk extra is not installed")
pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

import longcall
from adk.servers import APP_NAME, BIN, USER, model_texts, process, wait_for, write_agents
from longcall.adk import AdkAgentRunner, LongcallPlugin
from longcall.adk.server_apps import adk_workers, build_server_apps
from longcall.cli.main import main
from longcall.webhooks import new_secret, sign
from procs import free_port


def test_adk_api_server_and_longcall_worker_resume_run_and_run_sse_turns(
    db_url: str, tmp_path: Path
) -> None:
    """/run and /run_sse turns on adk api_server; a CLI completion and a signed webhook are
    resumed by `longcall worker --adk`, and each answer is in the session exactly once."""
    agents = write_agents(tmp_path)
    sessions_uri = f"sqlite:///{tmp_path / 'sessions.db'}"
    env = {**os.environ, "LONGCALL_DATABASE_URL": db_url}
    with longcall.App(db_url) as app:
        secret = app.store.add_hook_secret("batch", new_secret()).secret
    adk_port, lc_port = free_port(), free_port()
    adk_base, lc_base = f"http://127.0.0.1:{adk_port}", f"http://127.0.0.1:{lc_port}"
    plugin = ["--extra_plugins", "longcall.adk.LongcallPlugin"]
    server_args = [str(BIN / "adk"), "api_server", "--port", str(adk_port), str(agents)]
    worker_args = [str(BIN / "longcall"), "worker", "--adk", str(agents), "--poll", "0.1s"]
    with (
        process(
            [*server_args, "--session_service_uri", sessions_uri, *plugin],
            env,
            tmp_path / "adk.log",
        ),
        process(
            [*worker_args, "--session-service-uri", sessions_uri, *plugin],
            env,
            tmp_path / "worker.log",
        ) as worker,
        process(
            [str(BIN / "longcall"), "serve", "--port", str(lc_port), "--database", db_url],
            env,
            tmp_path / "serve.log",
        ),
        httpx.Client(base_url=adk_base, timeout=20) as adk_http,
    ):
        wait_for("adk api_server", lambda: adk_http.get("/list-apps").status_code == 200)
        wait_for("longcall serve", lambda: httpx.get(f"{lc_base}/healthz").status_code == 200)
        for session_id in ("s-run", "s-sse"):
            made = adk_http.post(f"/apps/{APP_NAME}/users/{USER}/sessions/{session_id}", json={})
            assert made.status_code == 200, made.text

        def turn(session_id: str, text: str) -> dict[str, Any]:
            return {
                "app_name": APP_NAME,
                "user_id": USER,
                "session_id": session_id,
                "new_message": {"role": "user", "parts": [{"text": text}]},
            }

        ran = adk_http.post("/run", json=turn("s-run", "Build the report for EMEA."))
        assert ran.status_code == 200, ran.text
        assert any(
            p.get("functionCall", {}).get("name") == "start_report"
            for e in ran.json()
            for p in e["content"]["parts"]
        )
        streamed = adk_http.post("/run_sse", json=turn("s-sse", "Build the report for APAC."))
        assert streamed.status_code == 200 and "start_report" in streamed.text
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()

        emea = longcall.job_id_for("report:EMEA", USER)
        apac = longcall.job_id_for("report:APAC", USER)
        completed = CliRunner().invoke(
            main,
            ["jobs", "complete", emea, "--result", '{"rows": 3}', "--database", db_url],
        )
        assert completed.exit_code == 0, completed.output
        body = json.dumps({"jobId": apac, "type": "complete", "result": {"rows": 7}}).encode()
        hooked = httpx.post(
            f"{lc_base}/v1/hooks/batch",
            content=body,
            headers={**sign(body, secret), "content-type": "application/json"},
        )
        assert (hooked.status_code, hooked.json()["outcome"]) == (200, "applied")

        def session(session_id: str) -> dict[str, Any]:
            got = adk_http.get(f"/apps/{APP_NAME}/users/{USER}/sessions/{session_id}")
            assert got.status_code == 200, got.text
            return dict(got.json())

        answers = {
            "s-run": "start_report has finished: rows 3.",
            "s-sse": "start_report has finished: rows 7.",
        }
        for session_id, answer in answers.items():
            wait_for(
                f"the resumed answer in {session_id}",
                lambda s=session_id, a=answer: a in model_texts(session(s)),
            )
        with longcall.App(db_url) as app:
            wait_for(
                "both deliveries recorded",
                lambda: all(app.get_job(j).delivered_at for j in (emea, apac)),
            )
        for session_id, answer in answers.items():
            assert model_texts(session(session_id)).count(answer) == 1
    worker_log = (tmp_path / "worker.log").read_text()
    assert "ADK apps: reports" in worker_log
    assert worker.returncode == 0, worker_log  # SIGTERM drains it and it exits cleanly


def test_every_app_of_the_folder_is_built_like_adk_api_server_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agent folders make two Runners named after the folders, sharing one session
    service, each with the --extra_plugins plugin, and a worker each with its own runner."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.setenv("LONGCALL_DATABASE_URL", url)
    agents = write_agents(tmp_path, ("billing", "reports"))
    apps = build_server_apps(
        agents, f"sqlite:///{tmp_path / 'sessions.db'}", ["longcall.adk.LongcallPlugin"]
    )
    assert [a.name for a in apps] == ["billing", "reports"]
    assert [a.runner.app_name for a in apps] == ["billing", "reports"]
    assert apps[0].runner.session_service is apps[1].runner.session_service
    for built in apps:
        [plugin] = built.runner.plugin_manager.plugins
        assert isinstance(plugin, LongcallPlugin) and plugin.name == "longcall.adk.LongcallPlugin"
        assert [t.name for t in built.tools] == ["start_report"]
    with longcall.App(url) as app:
        [worker] = adk_workers(app, apps)  # one worker, each app's jobs to its own runner
        runners = [d.runner for d in worker.deliverers]
        assert [r.app_name for r in runners if isinstance(r, AdkAgentRunner)] == [
            "billing",
            "reports",
        ]
        assert "start_report" in app.tools  # the dispatcher can re-run a lost submission
        for built in apps:
            asyncio.run(built.runner.close())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--session-service-uri", "memory://"], "memory of one process"),
        (["--session_service_uri", "sqlite://"], "memory of one process"),
        (["--session-service-uri", "nosuch://x"], "no session service for 'nosuch'"),
        ([], "--adk needs --session-service-uri"),
        (
            ["--session-service-uri", "sqlite:///s.db", "--extra_plugins", "no.such.Plugin"],
            "'no.such.Plugin' does not load",
        ),
    ],
)
def test_worker_adk_refuses_a_session_store_or_plugin_that_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    """Exit 2 with the reason, before any worker starts or any database is opened."""
    monkeypatch.chdir(tmp_path)
    agents = write_agents(tmp_path)
    got = CliRunner().invoke(main, ["worker", "--adk", str(agents), *args])
    assert got.exit_code == 2 and says in got.output, got.output
    assert not (tmp_path / "longcall.db").exists()


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_worker_adk_refuses_a_folder_without_agents(tmp_path: Path, folder: str) -> None:
    """A missing folder or one holding no agents is refused with exit 2."""
    (tmp_path / "empty").mkdir()
    got = CliRunner().invoke(
        main,
        ["worker", "--adk", str(tmp_path / folder), "--session-service-uri", "sqlite:///s.db"],
    )
    assert got.exit_code == 2, got.output
    assert "not a folder of ADK agents" in got.output or "holds no agent" in got.output
