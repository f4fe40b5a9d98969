"""A long-running tool on an agent that runs inside an ``AgentTool``, or behind a transfer.

google-adk's ``AgentTool`` runs its agent on a fresh in-memory session and discards it when
the agent answers. A job joined to that session's call was orphaned when it finished. The
job now answers the AgentTool's call in the caller's (lasting) session: the caller's agent
resumes with the result under the AgentTool's name. A sub-agent reached by transfer shares
the session and resumes as it always did. Real google-adk Runners, a real longcall worker,
SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402

from adk.session_files import sqlite_session_service  # noqa: E402
from longcall.core.jobs import CallIds, Delivery, Job, JobState  # noqa: E402

# google-adk 2.13's own AgentTool hands the caller's plugins to its nested Runner through the
# argument that Runner itself deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The `plugins` argument is deprecated:DeprecationWarning"
)

APP_NAME, USER, SESSION = "desk", "ana", "session-1"
RESULT = {"url": "https://files.example.com/ana.csv"}
WITHIN = 30.0


def export_data(export_type: str) -> dict[str, str]:
    """Exports the user's data as a file; the link arrives later."""
    return {"message": f"Exporting {export_type}."}


def exporter(app: longcall.App, rules: list[longcall.Rule], **tools: Any) -> LlmAgent:
    """The agent that owns the long-running export tool."""
    return LlmAgent(
        name="exporter",
        description="Exports the user's data.",
        model=adk.ScriptedLlm(rules=rules),
        tools=[adk.long_running_tool(app, export_data), *tools.values()],
    )


ASKS_EXPORTER = [
    longcall.Rule(r"please export", calls=[("exporter", {"request": "export my data to csv"})])
]
EXPORTS_CSV = [
    longcall.Rule(r"export my data to (csv)", calls=[("export_data", {"export_type": "csv"})])
]


class Desk:
    """One ADK app over a SQLite session file, its longcall App, and a worker on demand."""

    def __init__(self, db_url: str, directory: Path, root: LlmAgent, app: longcall.App) -> None:
        self.app = app
        self.sessions = sqlite_session_service(directory / "adk-sessions.db")
        self.runner = Runner(
            app=AdkApp(name=APP_NAME, root_agent=root, plugins=[adk.LongcallPlugin(app)]),
            session_service=self.sessions,
        )

    async def say(self, text: str) -> list[Event]:
        if await self.history() == []:
            await self.sessions.create_session(app_name=APP_NAME, user_id=USER, session_id=SESSION)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            e
            async for e in self.runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message
            )
        ]

    async def history(self) -> list[Event]:
        session = await self.sessions.get_session(
            app_name=APP_NAME, user_id=USER, session_id=SESSION
        )
        return [] if session is None else list(session.events)

    async def deliver(self, job_id: str) -> Job:
        """Run a real worker until ``job_id`` is no longer waiting for delivery."""
        worker = self.app.worker(adk.AdkAgentRunner(self.runner), poll_interval=0.05)
        task = asyncio.create_task(worker.run(handle_signals=False))
        try:
            deadline = time.monotonic() + WITHIN
            while (job := await self.app.get_job_async(job_id)).delivery is Delivery.READY:
                assert time.monotonic() < deadline, f"job {job_id} was never delivered"
                await asyncio.sleep(0.02)
        finally:
            worker.stop()
            await asyncio.wait_for(task, WITHIN)
        return job

    async def close(self) -> None:
        await self.runner.close()
        self.app.close()


def texts(events: list[Event], author: str) -> list[str]:
    return [
        "".join(p.text for p in e.content.parts or [] if p.text)
        for e in events
        if e.author == author and e.content and any(p.text for p in e.content.parts or [])
    ]


def calls(events: list[Event]) -> list[types.FunctionCall]:
    return [c for e in events for c in e.get_function_calls()]


def responses(events: list[Event]) -> list[types.FunctionResponse]:
    return [r for e in events for r in e.get_function_responses()]


@pytest.mark.parametrize("include_plugins", [True, False], ids=["plugins", "no-plugins"])
def test_a_job_inside_an_agent_tool_resumes_the_caller_with_its_result(
    db_url: str, tmp_path: Path, include_plugins: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The job joins the AgentTool's call in the caller's session; a worker delivers the
    result there under the AgentTool's name, and the caller's agent says it to the user."""

    async def scenario() -> None:
        app = longcall.App(db_url)
        inner = exporter(app, EXPORTS_CSV)
        agent_tool = AgentTool(inner, include_plugins=include_plugins)
        root = LlmAgent(
            name="coordinator", model=adk.ScriptedLlm(rules=ASKS_EXPORTER), tools=[agent_tool]
        )
        desk = Desk(db_url, tmp_path, root, app)
        try:
            turn = await desk.say("please export")
            # The caller's session holds only the AgentTool call and the inner agent's answer.
            [call] = calls(turn)
            assert (call.name, call.args) == ("exporter", {"request": "export my data to csv"})
            [first] = responses(turn)
            assert (first.id, first.name) == (call.id, "exporter")
            assert first.response == {
                "result": "I've started export_data. Exporting csv. I'll let you know when "
                "it's done."
            }
            assert texts(turn, "coordinator") == [
                "exporter answered: result I've started export_data. Exporting csv. I'll let "
                "you know when it's done.."
            ]
            [job] = await app.list_jobs_async()
            assert job.tool_name == "export_data" and job.args == {"export_type": "csv"}
            assert job.ids == CallIds(APP_NAME, USER, SESSION, call.id, turn[0].invocation_id)
            assert (job.state, job.delivery) == (JobState.STARTED, Delivery.NONE)

            await app.complete_async(job.job_id, RESULT)
            before = len(await desk.history())
            job = await desk.deliver(job.job_id)
            assert (job.state, job.delivery, job.last_error) == (
                JobState.SUCCEEDED,
                Delivery.DELIVERED,
                None,
            )
            resumed = (await desk.history())[before:]
            assert [(e.author, e.invocation_id) for e in resumed] == [
                ("user", job.invocation_id),
                ("coordinator", job.invocation_id),
            ]
            [answer] = responses(resumed)
            assert (answer.id, answer.name) == (call.id, "exporter")
            assert answer.response == {"status": "succeeded", "jobId": job.job_id, "result": RESULT}
            assert texts(resumed, "coordinator") == [
                "exporter has finished: url https://files.example.com/ana.csv."
            ]
            # Nothing tried to join the job to the nested session's call, nor found it odd.
            assert [e.kind for e in await app.job_events_async(job.job_id)] == ["succeeded"]
            assert [r.message for r in caplog.records if r.name.startswith("longcall")] == []
        finally:
            await desk.close()

    asyncio.run(scenario())


def test_agent_tools_within_agent_tools_answer_the_outermost_call(
    db_url: str, tmp_path: Path
) -> None:
    """Two AgentTools deep, the job answers the call the lasting session holds."""

    async def scenario() -> None:
        app = longcall.App(db_url)
        inner = exporter(app, EXPORTS_CSV)
        middle = LlmAgent(
            name="manager",
            description="Delegates exports.",
            model=adk.ScriptedLlm(
                rules=[
                    longcall.Rule(
                        r"delegate", calls=[("exporter", {"request": "export my data to csv"})]
                    )
                ]
            ),
            tools=[AgentTool(inner)],
        )
        root = LlmAgent(
            name="coordinator",
            model=adk.ScriptedLlm(
                rules=[
                    longcall.Rule(r"please export", calls=[("manager", {"request": "delegate"})])
                ]
            ),
            tools=[AgentTool(middle)],
        )
        desk = Desk(db_url, tmp_path, root, app)
        try:
            turn = await desk.say("please export")
            [call] = calls(turn)
            assert call.name == "manager"
            [job] = await app.list_jobs_async()
            assert job.ids == CallIds(APP_NAME, USER, SESSION, call.id, turn[0].invocation_id)

            await app.complete_async(job.job_id, RESULT)
            before = len(await desk.history())
            job = await desk.deliver(job.job_id)
            assert job.delivery is Delivery.DELIVERED
            resumed = (await desk.history())[before:]
            [answer] = responses(resumed)
            assert (answer.id, answer.name) == (call.id, "manager")
            assert texts(resumed, "coordinator") == [
                "manager has finished: url https://files.example.com/ana.csv."
            ]
        finally:
            await desk.close()

    asyncio.run(scenario())


def test_a_second_job_in_one_agent_tool_call_is_refused_and_starts_nothing(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One AgentTool call waits on one job: of two long-running calls in its nested run,
    one starts a job and the other gets an error map saying why, and no job."""
    submitted: list[str] = []

    def export_file(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
        """Exports the user's data as a file; the link arrives later."""
        submitted.append(export_type)
        return {"message": f"Exporting {export_type}."}

    async def scenario() -> None:
        app = longcall.App(db_url)
        both = [
            longcall.Rule(
                r"export my data",
                calls=[
                    ("export_file", {"export_type": "csv"}),
                    ("export_file", {"export_type": "json"}),
                ],
            )
        ]
        inner = LlmAgent(
            name="exporter",
            description="Exports the user's data.",
            model=adk.ScriptedLlm(rules=both),
            tools=[adk.long_running_tool(app, export_file)],
        )
        root = LlmAgent(
            name="coordinator", model=adk.ScriptedLlm(rules=ASKS_EXPORTER), tools=[AgentTool(inner)]
        )
        desk = Desk(db_url, tmp_path, root, app)
        try:
            caplog.set_level(logging.WARNING, logger="longcall.adk")
            turn = await desk.say("please export")
            [call] = calls(turn)
            [job] = await app.list_jobs_async()
            assert job.call_id == call.id
            assert submitted == [job.args["export_type"]]
            [warning] = [r for r in caplog.records if r.name == "longcall.adk"]
            assert "inside AgentTool 'exporter'" in warning.getMessage()
            # The inner agent heard of both calls, and the caller got its words.
            started, refused = ("csv", "json") if submitted == ["csv"] else ("json", "csv")
            heard = {
                started: f"I've started export_file. Exporting {started}. I'll let you know "
                "when it's done.",
                refused: "I couldn't run export_file: export_file was not started: it runs "
                "inside AgentTool 'exporter', whose call already waits on another "
                "long-running job, and one AgentTool call can wait on only one. Ask for it "
                "again once that job's result is in.",
            }
            [answer] = responses(turn)
            assert answer.response == {"result": f"{heard['csv']} {heard['json']}"}
            assert texts(turn, "coordinator") == [
                f"exporter answered: result {heard['csv']} {heard['json']}."
            ]
        finally:
            await desk.close()

    asyncio.run(scenario())


def test_a_sub_agent_reached_by_transfer_resumes_in_the_shared_session(
    db_url: str, tmp_path: Path
) -> None:
    """A transfer keeps one session: the job joins the sub-agent's own call, and the
    sub-agent resumes with the result."""

    async def scenario() -> None:
        app = longcall.App(db_url)
        inner = exporter(
            app,
            [longcall.Rule(r"transfer_to_agent", calls=[("export_data", {"export_type": "csv"})])],
        )
        root = LlmAgent(
            name="coordinator",
            model=adk.ScriptedLlm(
                rules=[
                    longcall.Rule(
                        r"please export",
                        calls=[("transfer_to_agent", {"agent_name": "exporter"})],
                    )
                ]
            ),
            sub_agents=[inner],
        )
        desk = Desk(db_url, tmp_path, root, app)
        try:
            turn = await desk.say("please export")
            [export_call] = [c for c in calls(turn) if c.name == "export_data"]
            [call_event] = [e for e in turn if export_call in e.get_function_calls()]
            assert call_event.author == "exporter"
            assert call_event.long_running_tool_ids == {export_call.id}
            [job] = await app.list_jobs_async()
            assert job.ids == CallIds(
                APP_NAME, USER, SESSION, export_call.id, call_event.invocation_id
            )

            await app.complete_async(job.job_id, RESULT)
            before = len(await desk.history())
            job = await desk.deliver(job.job_id)
            assert job.delivery is Delivery.DELIVERED
            resumed = (await desk.history())[before:]
            assert [e.author for e in resumed] == ["user", "exporter"]
            [answer] = responses(resumed)
            assert (answer.id, answer.name) == (export_call.id, "export_data")
            assert texts(resumed, "exporter") == [
                "export_data has finished: url https://files.example.com/ana.csv."
            ]
        finally:
            await desk.close()

    asyncio.run(scenario())


def test_a_single_turn_sub_agent_resumes_itself_and_then_its_caller(
    db_url: str, tmp_path: Path
) -> None:
    """google-adk's own advice instead of AgentTool (a ``mode='single_turn'`` sub-agent) runs
    in the caller's session: the job joins the sub-agent's call, the sub-agent hears the
    result and answers, and its answer becomes the caller's response."""

    async def scenario() -> None:
        app = longcall.App(db_url)
        inner = LlmAgent(
            name="exporter",
            description="Exports the user's data.",
            model=adk.ScriptedLlm(rules=EXPORTS_CSV),
            tools=[adk.long_running_tool(app, export_data)],
            mode="single_turn",
        )
        root = LlmAgent(
            name="coordinator", model=adk.ScriptedLlm(rules=ASKS_EXPORTER), sub_agents=[inner]
        )
        desk = Desk(db_url, tmp_path, root, app)
        try:
            turn = await desk.say("please export")
            [outer_call, export_call] = calls(turn)
            assert (outer_call.name, export_call.name) == ("exporter", "export_data")
            # The caller's call stays open while the sub-agent waits on its job.
            assert [r.id for r in responses(turn)] == [export_call.id]
            assert texts(turn, "exporter") == [
                "I've started export_data. Exporting csv. I'll let you know when it's done."
            ]
            [job] = await app.list_jobs_async()
            assert job.ids == CallIds(
                APP_NAME, USER, SESSION, export_call.id, turn[0].invocation_id
            )

            await app.complete_async(job.job_id, RESULT)
            before = len(await desk.history())
            job = await desk.deliver(job.job_id)
            assert job.delivery is Delivery.DELIVERED
            resumed = (await desk.history())[before:]
            finished = "export_data has finished: url https://files.example.com/ana.csv."
            assert texts(resumed, "exporter") == [finished]
            assert [(r.id, r.response) for r in responses(resumed)] == [
                (export_call.id, {"status": "succeeded", "jobId": job.job_id, "result": RESULT}),
                (outer_call.id, {"result": finished}),
            ]
            assert texts(resumed, "coordinator") == [f"exporter answered: result {finished}."]
        finally:
            await desk.close()

    asyncio.run(scenario())
