"""The ADK integration end to end with the real google-adk: call, progress, completion."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402


def test_importing_longcall_never_imports_google_adk() -> None:
    """`import longcall` leaves google-adk unloaded: the integration is an optional extra."""
    code = "import sys, longcall, longcall.testing; print('google.adk' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_call_progress_and_completion_resume_the_adk_session(tmp_path: Path) -> None:
    """A real Runner: the tool records the join, progress and the result resume the call once."""

    async def scenario() -> None:
        app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}")

        def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
            """Exports user data."""
            return {"message": f"Exporting {export_type} data. This may take some time."}

        tool = adk.long_running_tool(app, export_data, key="export:{session_id}:{export_type}")
        declaration = tool._get_declaration()
        assert "long-running operation" in declaration.description
        assert set(declaration.parameters_json_schema["properties"]) == {"export_type"}
        llm = adk.ScriptedLlm(
            rules=[
                longcall.Rule(
                    r"export my data to (csv|json)",
                    calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
                )
            ]
        )
        sessions = InMemorySessionService()
        runner = Runner(
            app=AdkApp(
                name="exports",
                root_agent=LlmAgent(name="exporter", model=llm, tools=[tool]),
                plugins=[adk.LongcallPlugin(app)],
            ),
            session_service=sessions,
        )
        await sessions.create_session(app_name="exports", user_id="u", session_id="s")
        events = [
            e
            async for e in runner.run_async(
                user_id="u",
                session_id="s",
                new_message=types.Content(
                    role="user", parts=[types.Part(text="Export my data to CSV")]
                ),
            )
        ]
        call_ids = set().union(*(e.long_running_tool_ids or set() for e in events))
        [job] = await app.list_jobs_async()
        assert job.job_id == longcall.job_id_for("export:s:csv", "u")
        assert (job.app_name, job.user_id, job.session_id) == ("exports", "u", "s")
        assert call_ids == {job.call_id} and job.invocation_id == events[0].invocation_id
        resumer = app.deliverer(adk.AdkAgentRunner(runner))
        await app.progress_async(job.job_id, {"progress": "50%"}, notify_model=True)
        assert await resumer.run_once() == 1
        await app.complete_async(job.job_id, {"url": "https://example.com/export.csv"})
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        session = await sessions.get_session(app_name="exports", user_id="u", session_id="s")
        responses = [
            r.response
            for e in session.events
            if e.author == "user"
            for r in e.get_function_responses()
        ]
        assert [r["status"] for r in responses] == ["running", "succeeded"]
        assert all(r.id == job.call_id for e in session.events for r in e.get_function_responses())
        texts = [
            p.text
            for e in session.events
            if e.author == "exporter"
            for p in e.content.parts
            if p.text
        ]
        assert texts[-1] == "export_data has finished: url https://example.com/export.csv."
        assert resumer.stats == {"progress_delivered": 1, "delivered": 1}
        app.close()

    asyncio.run(scenario())


def test_demo_plays_the_worked_example_on_adk() -> None:
    """`longcall demo --adk` runs the worked example through a real ADK Runner, offline."""
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "longcall"), "demo", "--adk", "--in-process"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "with google-adk with the offline scripted model" in proc.stdout
    assert "rowCount 48213" in proc.stdout and "No result within 45 minutes" in proc.stdout
    assert "all 12 checks passed" in proc.stdout and "✗" not in proc.stdout
