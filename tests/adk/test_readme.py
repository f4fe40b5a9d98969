"""The README's google-adk section runs as written, and makes the tool durable."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.genai import types  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_adk_block() -> str:
    """The python block that follows the readme-adk marker."""
    text = README.read_text()
    match = re.search(r"<!-- readme-adk:.*?-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its google-adk example"
    return match.group(1)


def test_readme_adk_example_is_short() -> None:
    """Making the tool durable takes under ten lines beyond the tool and the imports."""
    code = readme_adk_block()
    body = code[code.index("jobs = longcall.App") :]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) < 10


def test_readme_adk_example_runs_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's code, run as written (with the offline model), resumes a completed export."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(readme_adk_block(), str(README), "exec"), namespace)
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
