"""ADK's long_running_functions sample, replayed on the real Runner against longcall's fixtures.

Each file in ``fixtures/`` is one request of the sample ("Export my data to CSV", "Start a
JSON data export", "Export my data to both CSV and JSON simultaneously"): the steps to
perform (the user's message, progress, completions, resumer passes) and every event the ADK
session must hold afterwards, in order. Call ids are random (``adk-<uuid>``), so events name
calls by position (``call``: 0 is the first function call of the session) and invocations by
order of appearance (``invocation``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.json"))
APP_NAME = "data_exports"
AGENT_NAME = "long_running_functions"


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def export_data(export_type: str) -> dict[str, str]:
    """Exports user data.

    Args:
        export_type: The type of data to export (e.g., csv, json).
    """
    # As in the sample: a real application would kick off a background job here.
    return {
        "status": "in-progress",
        "progress": "0%",
        "message": f"Exporting {export_type} data. This may take some time.",
    }


def scripted_model() -> Any:
    """The sample's model, scripted: CSV, JSON, or both in one turn."""
    return adk.ScriptedLlm(
        rules=[
            longcall.Rule(
                r"both (csv|json) and (csv|json)",
                calls=[
                    ("export_data", lambda m: {"export_type": m[1].lower()}),
                    ("export_data", lambda m: {"export_type": m[2].lower()}),
                ],
            ),
            longcall.Rule(
                r"\b(csv|json)\b", calls=[("export_data", lambda m: {"export_type": m[1].lower()})]
            ),
        ]
    )


class Replay:
    """One fixture's world: a longcall App, the real ADK Runner, and the resumer."""

    def __init__(self, tmp_path: Path, user_id: str, session_id: str) -> None:
        self.app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}")
        self.tool = adk.long_running_tool(
            self.app, export_data, key="export:{session_id}:{export_type}"
        )
        self.sessions = InMemorySessionService()
        agent = LlmAgent(
            name=AGENT_NAME,
            model=scripted_model(),
            instruction=(
                "You are an assistant that can export user data. When the user asks to "
                "export data, call the export_data tool."
            ),
            tools=[self.tool],
        )
        self.runner = Runner(
            app=AdkApp(name=APP_NAME, root_agent=agent, plugins=[adk.LongcallPlugin(self.app)]),
            session_service=self.sessions,
        )
        self.deliverer = self.app.deliverer(adk.AdkAgentRunner(self.runner))
        self.user_id, self.session_id = user_id, session_id

    async def events(self) -> list[Event]:
        session = await self.sessions.get_session(
            app_name=APP_NAME, user_id=self.user_id, session_id=self.session_id
        )
        assert session is not None
        return list(session.events)

    async def perform(self, step: dict[str, Any]) -> None:
        before = len(await self.events())
        action = step["do"]
        if action == "user_message":
            message = types.Content(role="user", parts=[types.Part(text=step["text"])])
            async for _ in self.runner.run_async(
                user_id=self.user_id, session_id=self.session_id, new_message=message
            ):
                pass
        elif action == "progress":
            job = await self.app.progress_async(
                step["job"], step["data"], notify_model=step["notify_model"]
            )
            assert job is not None and job.progress == step["data"]
        elif action == "complete":
            outcome = await self.app.complete_async(step["job"], step["result"])
            assert outcome.changed is step["changed"]
            assert outcome.job.result == step["result"]
        elif action == "resume":
            assert await self.deliverer.run_once() == step["handled"]
        else:
            pytest.fail(f"unknown step {action!r}")
        if "adds_events" in step:
            assert len(await self.events()) - before == step["adds_events"], step


def describe(events: list[Event]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The session's events in the fixtures' terms, with the call and invocation ids in order."""
    calls: list[str] = []
    invocations: list[str] = []
    described = []
    for event in events:
        if event.invocation_id not in invocations:
            invocations.append(event.invocation_id)
        item: dict[str, Any] = {
            "invocation": invocations.index(event.invocation_id),
            "author": event.author,
        }
        function_calls = event.get_function_calls()
        responses = event.get_function_responses()
        parts = event.content.parts if event.content and event.content.parts else []
        text = "".join(p.text for p in parts if p.text) or None
        long_running = set(event.long_running_tool_ids or ())
        if function_calls and not responses and text is None:
            item["kind"] = "function_call"
            item["calls"] = []
            for call in function_calls:
                assert call.id and call.id not in calls, "ADK gives each call a fresh id"
                calls.append(call.id)
                item["calls"].append(
                    {
                        "call": calls.index(call.id),
                        "tool": call.name,
                        "args": dict(call.args or {}),
                        "long_running": call.id in long_running,
                    }
                )
            long_running -= set(calls)
        elif responses and not function_calls and text is None:
            item["kind"] = "function_response"
            item["responses"] = [
                {
                    "call": calls.index(r.id) if r.id in calls else f"unknown id {r.id!r}",
                    "tool": r.name,
                    "response": dict(r.response or {}),
                }
                for r in responses
            ]
        elif text is not None and not function_calls and not responses:
            item["kind"] = "text"
            item["text"] = text
        else:
            item["kind"] = "mixed"
            item["content"] = event.content.model_dump(mode="json") if event.content else None
        if long_running:  # a long-running id on an event that does not make that call
            item["stray_long_running_ids"] = sorted(long_running)
        described.append(item)
    return described, calls, invocations


def test_the_fixtures_cover_the_three_requests_of_the_sample() -> None:
    """There is one fixture per request of ADK's long_running_functions sample."""
    assert sorted(load(p)["request"] for p in FIXTURES) == [
        "Export my data to CSV",
        "Export my data to both CSV and JSON simultaneously",
        "Start a JSON data export",
    ]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_the_adk_session_holds_exactly_the_fixtures_events(path: Path, tmp_path: Path) -> None:
    """Steps on the real ADK Runner leave exactly the fixture's events, in order, and its jobs."""
    fixture = load(path)

    async def scenario() -> None:
        user_id, session_id = fixture["session"]["user_id"], fixture["session"]["session_id"]
        world = Replay(tmp_path, user_id, session_id)
        try:
            await world.sessions.create_session(
                app_name=APP_NAME, user_id=user_id, session_id=session_id
            )
            for step in fixture["steps"]:
                await world.perform(step)
            events = await world.events()
            described, calls, invocations = describe(events)

            # Every event, in order.
            expected = fixture["events"]
            for index, (got, want) in enumerate(zip(described, expected, strict=False)):
                assert got == want, f"event {index} of {path.name}"
            assert len(described) == len(expected)

            # Function responses carry the original call id and the tool name of that call.
            names = {c.id: c.name for e in events for c in e.get_function_calls()}
            responses = [r for e in events for r in e.get_function_responses()]
            assert responses and all(r.id in names for r in responses)
            assert all(r.name == names[r.id] for r in responses)

            # Each job row joins app, user, session, call and invocation id.
            call_invocation = {
                c.id: e.invocation_id for e in events for c in e.get_function_calls()
            }
            jobs = {j.job_id: j for j in await world.app.list_jobs_async()}
            assert sorted(jobs) == sorted(j["job_id"] for j in fixture["jobs"])
            for want_job in fixture["jobs"]:
                job = jobs[want_job["job_id"]]
                call_id = calls[want_job["call"]]
                assert job.ids == longcall.CallIds(
                    app_name=APP_NAME,
                    user_id=user_id,
                    session_id=session_id,
                    call_id=call_id,
                    invocation_id=call_invocation[call_id],
                )
                assert job.invocation_id == invocations[0]
                assert job.tool_name == "export_data"
                assert job.args == want_job["args"]
                assert job.state.value == want_job["state"]
                assert job.delivery.value == want_job["delivery"]
                assert job.progress == want_job["progress"]
                log = await world.app.job_events_async(job.job_id)
                assert [e.kind for e in log] == want_job["log"]
            assert dict(world.deliverer.stats) == fixture["resumer_stats"]
        finally:
            world.app.close()

    asyncio.run(scenario())
