"""The google-adk guide (docs/adk.md) runs as written, and makes the tool durable."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.genai import types  # noqa: E402

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "adk.md"


def guide_adk_block() -> str:
    """The python block that follows the docs-adk marker."""
    text = GUIDE.read_text()
    match = re.search(r"<!-- docs-adk:.*?-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "the google-adk guide lost its example"
    return match.group(1)


def test_guide_adk_example_is_short() -> None:
    """Making the tool durable takes under ten lines beyond the tool and the imports."""
    code = guide_adk_block()
    body = code[code.index("jobs = longcall.App") :]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) < 10


def test_guide_adk_example_runs_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's code, run as written (with the offline model), resumes a completed export."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(guide_adk_block(), str(GUIDE), "exec"), namespace)
    jobs, agent, runner, worker = (namespace[k] for k in ("jobs", "agent", "runner", "worker"))
    assert isinstance(jobs, longcall.App) and isinstance(worker, longcall.Worker)
    assert os.path.exists(tmp_path / "longcall.db")
    # No network here: the offline model stands in for Gemini.
    agent.model = adk.ScriptedLlm(
        rules=[
            longcall.Rule(
                r"export my data to (\w+)",
                calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
            )
        ]
    )

    async def scenario() -> list[str]:
        sessions = runner.session_service
        await sessions.create_session(app_name="exports", user_id="ana", session_id="s1")
        message = types.Content(role="user", parts=[types.Part(text="Export my data to CSV")])
        async for _ in runner.run_async(user_id="ana", session_id="s1", new_message=message):
            pass
        # The plugin gives the turn's session lease back after the turn; until it has, a
        # delivery to that session waits its turn.
        for plugin in runner.plugin_manager.plugins:
            if isinstance(plugin, adk.LongcallPlugin):
                await plugin.settled()
        outcome = await jobs.complete_async(
            longcall.job_id_for("export:s1:csv", "ana"), {"url": "https://example.com/a.csv"}
        )
        assert outcome.changed
        assert await worker.deliverer.run_once() == 1
        session = await sessions.get_session(app_name="exports", user_id="ana", session_id="s1")
        return [p.text for e in session.events for p in e.content.parts if p.text]

    texts = asyncio.run(scenario())
    assert texts[-1] == "export_data has finished: url https://example.com/a.csv."
    jobs.close()


def guide_agent_module() -> str:
    """The agents-folder module of the google-adk guide."""
    match = re.search(r"<!-- docs-adk-agent:.*?-->\s*```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert match, "the google-adk guide lost its agents-folder example"
    return match.group(1)


def test_the_guide_from_agents_folder_to_resumed_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's steps as written: its agent module in an agents folder, the apps built as
    `adk api_server` and `longcall worker --adk` build them, a user turn through that app, the
    guide's `longcall jobs list --session` and `jobs complete` commands, and the resume."""
    from click.testing import CliRunner

    from longcall.adk.server_apps import adk_workers, build_server_apps
    from longcall.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGCALL_DATABASE_URL", f"sqlite:///{tmp_path / 'longcall.db'}")
    folder = tmp_path / "agents" / "exports"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from . import agent\n")
    # As written, except the model: no network here, so the offline model stands in.
    (folder / "agent.py").write_text(
        guide_agent_module()
        + "\nroot_agent.model = __import__('longcall.adk').adk.ScriptedLlm(rules=[\n"
        "    longcall.Rule(r'export my data to (\\w+)',\n"
        "                  calls=[('export_data', lambda m: {'export_type': m[1].lower()})])])\n"
    )
    [exports] = build_server_apps(
        tmp_path / "agents",
        f"sqlite:///{tmp_path / 'sessions.db'}",
        ["longcall.adk.LongcallPlugin"],
    )
    cli = CliRunner()

    async def scenario() -> list[Any]:
        runner = exports.runner
        await runner.session_service.create_session(
            app_name="exports", user_id="ana", session_id="s1"
        )
        message = types.Content(role="user", parts=[types.Part(text="Export my data to CSV")])
        async for _ in runner.run_async(user_id="ana", session_id="s1", new_message=message):
            pass
        # The plugin gives the turn's session lease back after the turn; until it has, a
        # delivery to that session waits its turn.
        for plugin in runner.plugin_manager.plugins:
            if isinstance(plugin, adk.LongcallPlugin):
                await plugin.settled()
        # The CLI blocks: from another thread, as from another terminal.
        listed = await asyncio.to_thread(
            cli.invoke, main, ["jobs", "list", "--session", "s1", "-o", "json"]
        )
        assert listed.exit_code == 0, (listed.output, listed.exception)
        [job] = json.loads(listed.output)
        done = await asyncio.to_thread(
            cli.invoke,
            main,
            ["jobs", "complete", job["jobId"], "--result", '{"url": "https://example.com/e.csv"}'],
        )
        assert done.exit_code == 0, done.output
        with longcall.App() as app:
            [worker] = adk_workers(app, [exports])
            assert await worker.deliverers[0].run_once() == 1
        await runner.close()
        session = await runner.session_service.get_session(
            app_name="exports", user_id="ana", session_id="s1"
        )
        return [(p.text, p.function_response) for e in session.events for p in e.content.parts]

    parts = asyncio.run(scenario())
    [pending, final] = [r.response for _, r in parts if r is not None]
    assert pending["status"] == "pending" and pending["eta"] == "about 20 minutes"
    assert pending["jobId"] == longcall.job_id_for("export:s1:csv", "ana")
    assert final["status"] == "succeeded"
    assert parts[-1][0] == "export_data has finished: url https://example.com/e.csv."
