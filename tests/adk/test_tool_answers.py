"""What a long-running tool answers, on the real google-adk Runner with the scripted model.

ADK's approval sample returns a ticket id and an amount beside its status: those reach the
model in the pending map, while status and jobId stay longcall's. A key-less tool run again
for the same call (as a framework re-executing a node does) gets the job it already has, and
the job is delivered once. The scripted model understands the status words of ADK's samples.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.tools.long_running_tool import LongRunningFunctionTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

from longcall.agents import FunctionResponse  # noqa: E402
from longcall.core.jobs import CallIds  # noqa: E402
from longcall.jobs.tools import DEFAULT_PENDING_MESSAGE, pending_answer  # noqa: E402
from longcall.shapes import job_json  # noqa: E402
from longcall.testing.scripted import default_reply  # noqa: E402

APP_NAME, AGENT, USER, SESSION = "expenses", "reimburser", "ana", "s-1"
ASK = "Please get approval to reimburse 500 for the team offsite."
RULES = [
    longcall.Rule(
        r"approval to reimburse (\d+) for (.+)\.",
        calls=[("ask_for_approval", lambda m: {"purpose": m[2], "amount": float(m[1])})],
    )
]


class RecordingLlm(adk.ScriptedLlm):
    """The scripted model, keeping every request ADK sent it."""

    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncIterator[Any]:
        self.requests.append(llm_request)
        async for response in super().generate_content_async(llm_request, stream):
            yield response

    def responses_seen(self) -> list[dict[str, Any]]:
        """The function responses in the latest request, as the model was given them."""
        return [
            dict(p.function_response.response or {})
            for c in self.requests[-1].contents or []
            for p in c.parts or []
            if p.function_response
        ]


@dataclass
class Agent:
    app: longcall.App
    runner: Runner
    sessions: InMemorySessionService
    model: RecordingLlm

    async def ask(self, text: str, user: str = USER) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        events = [
            e
            async for e in self.runner.run_async(
                user_id=user, session_id=SESSION, new_message=message
            )
        ]
        await self.settled()
        return events

    async def settled(self) -> None:
        """Wait for the plugin to give the turn's session lease back: the run does not wait
        for it, and a delivery to the session waits until it is back."""
        for plugin in self.runner.plugin_manager.plugins:
            if isinstance(plugin, adk.LongcallPlugin):
                await plugin.settled()

    async def history(self) -> list[Event]:
        session = await self.sessions.get_session(
            app_name=APP_NAME, user_id=USER, session_id=SESSION
        )
        assert session is not None
        return list(session.events)


@asynccontextmanager
async def agent_with(
    db_url: str, tools: Callable[[longcall.App], list[Any]] = lambda app: []
) -> AsyncIterator[Agent]:
    """An ADK agent on the scripted model, with ``tools(app)`` and longcall's plugin."""
    app = longcall.App(db_url)
    model = RecordingLlm(rules=RULES)
    sessions = InMemorySessionService()
    runner = Runner(
        app=AdkApp(
            name=APP_NAME,
            root_agent=LlmAgent(name=AGENT, model=model, tools=tools(app)),
            plugins=[adk.LongcallPlugin(app)],
        ),
        session_service=sessions,
    )
    await sessions.create_session(app_name=APP_NAME, user_id=USER, session_id=SESSION)
    try:
        yield Agent(app, runner, sessions, model)
    finally:
        await runner.close()
        app.close()


def texts(events: list[Event]) -> list[str]:
    return [
        "".join(p.text for p in e.content.parts if p.text)
        for e in events
        if e.author == AGENT and e.content and any(p.text for p in e.content.parts or [])
    ]


def call_and_pending(turn: list[Event]) -> tuple[types.FunctionCall, dict[str, Any]]:
    [call] = [c for e in turn for c in e.get_function_calls()]
    [pending] = [dict(r.response or {}) for e in turn for r in e.get_function_responses()]
    return call, pending


# -- 4: the tool's own fields reach the model ------------------------------------------------


def test_the_approval_samples_ticket_and_amount_reach_the_model(db_url: str) -> None:
    """ADK's approval sample, made durable: its ticketId and amount are in the model's request."""
    submitted: list[str] = []

    def ask_for_approval(purpose: str, amount: float, job: longcall.JobHandle) -> dict[str, Any]:
        """Ask for approval for the reimbursement."""
        submitted.append(job.id)
        return {
            "status": "pending",
            "approver": "Sean Zhou",
            "purpose": purpose,
            "amount": amount,
            "ticketId": "approval-ticket-1",
        }

    async def scenario() -> None:
        async with agent_with(
            db_url, lambda app: [adk.long_running_tool(app, ask_for_approval)]
        ) as a:
            call, pending = call_and_pending(await a.ask(ASK))
            [job] = await a.app.list_jobs_async()
            expected = {
                "status": "pending",
                "jobId": job.job_id,
                "message": DEFAULT_PENDING_MESSAGE,
                "approver": "Sean Zhou",
                "purpose": "the team offsite",
                "amount": 500.0,
                "ticketId": "approval-ticket-1",
            }
            assert pending == expected
            # The model's own request after the tool ran carries the fields.
            assert a.model.responses_seen() == [expected]
            assert texts(await a.history())[-1] == (
                f"I've started ask_for_approval. {DEFAULT_PENDING_MESSAGE} "
                "(approver Sean Zhou, purpose the team offsite, amount 500.0, ticketId "
                "approval-ticket-1) I'll let you know when it's done."
            )
            # They live on the job row (and its API shape) for every later pending answer.
            assert job.pending_fields == {
                k: v for k, v in expected.items() if k not in ("status", "jobId", "message")
            }
            assert job_json(job)["pendingFields"] == job.pending_fields
            assert submitted == [job.job_id] and job.call_id == call.id

    asyncio.run(scenario())


@dataclasses.dataclass
class Amount:
    value: float
    currency: str


def test_reserved_keys_stay_longcalls_and_each_dropped_field_is_logged(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool's own status or jobId never replaces longcall's; the drop is logged, not silent."""
    lock = threading.Lock()

    def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
        """Ask for approval for the reimbursement."""
        return {
            "status": "awaiting_approval",
            "jobId": "ticket-7",
            "message": 7,  # not a string: its text is the message
            "ticketId": "ticket-7",
            "amount": Amount(amount, "EUR"),
            "due": dt.date(2026, 12, 24),
            "lock": lock,  # no JSON form: left out
            "ratio": float("nan"),  # no JSON form PostgreSQL takes: left out
        }

    async def scenario() -> None:
        async with agent_with(
            db_url, lambda app: [adk.long_running_tool(app, ask_for_approval)]
        ) as a:
            with caplog.at_level(logging.WARNING, logger="longcall.tools"):
                call, pending = call_and_pending(await a.ask(ASK))
            [job] = await a.app.list_jobs_async()
            assert pending == {
                "status": "pending",
                "jobId": job.job_id,
                "message": "7",
                "ticketId": "ticket-7",
                "amount": {"value": 500.0, "currency": "EUR"},
                "due": "2026-12-24",
            }
            assert a.model.responses_seen() == [pending]
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 4, warnings
            assert "returned status='awaiting_approval'" in warnings[0]
            assert "keeps longcall's 'pending'" in warnings[0]
            assert "returned jobId='ticket-7'" in warnings[1]
            assert "field 'lock' of type lock" in warnings[2]
            assert "field 'ratio' of type float" in warnings[3]
            # The job's id, state and delivery are untouched by the tool's words.
            job = await a.app.get_job_async(job.job_id)
            assert job.job_id.startswith("job-") and job.state is longcall.JobState.STARTED
            assert job.call_id == call.id

    asyncio.run(scenario())


@pytest.mark.parametrize("status", ["pending", "in-progress", "In Progress", "running"])
def test_a_still_working_status_from_the_tool_agrees_quietly(
    status: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ADK's export sample says "in-progress": that agrees with pending, so nothing is logged."""
    returned = {"status": status, "progress": "0%", "message": "Exporting."}
    with caplog.at_level(logging.WARNING, logger="longcall.tools"):
        answer = pending_answer(returned, tool_name="export_data", job_id="j")
    assert (answer.message, answer.fields) == ("Exporting.", {"progress": "0%"})
    assert caplog.records == []


# -- 5: a key-less tool called again for the same call -------------------------------------


def test_a_keyless_tool_called_again_for_its_call_returns_the_same_job(db_url: str) -> None:
    """Re-executed for the same session, call and user: the same job and map; delivered once."""
    submitted: list[str] = []
    tools: list[Any] = []

    def ask_for_approval(purpose: str, amount: float, job: longcall.JobHandle) -> dict[str, Any]:
        """Ask for approval for the reimbursement."""
        submitted.append(job.id)
        return {"message": "Sent to Sean.", "ticketId": f"T-{len(submitted)}"}

    def build(app: longcall.App) -> list[Any]:
        tools.append(adk.long_running_tool(app, ask_for_approval))
        return tools

    async def scenario() -> None:
        async with agent_with(db_url, build) as a:
            [tool] = tools
            turn = await a.ask(ASK)
            call, pending = call_and_pending(turn)
            ids = CallIds(APP_NAME, USER, SESSION, call.id, turn[0].invocation_id)
            args = dict(call.args or {})

            # The framework runs the tool again for the same call, twice, once concurrently.
            again = await asyncio.gather(
                tool.job_tool.invoke_async(args, ids), tool.job_tool.invoke_async(args, ids)
            )
            assert again == [pending, pending]
            assert pending["ticketId"] == "T-1" and submitted == [pending["jobId"]]
            assert [j.job_id for j in await a.app.list_jobs_async()] == [pending["jobId"]]

            # Another tool, other arguments, or a keyed tool's other key: still a conflict.
            with pytest.raises(longcall.AttachConflict, match="args"):
                await tool.job_tool.invoke_async({**args, "amount": 9.0}, ids)

            @a.app.long_running(key="approval:{purpose}")
            def keyed(purpose: str) -> str:
                return "keyed"

            with pytest.raises(longcall.AttachConflict, match="call_id"):
                await keyed.invoke_async({"purpose": "other"}, ids)
            assert submitted == [pending["jobId"]]

            # Completed once, it is delivered once, whatever the repeats did.
            outcome = await a.app.complete_async(pending["jobId"], {"approved": True})
            assert outcome.changed
            deliverer = a.app.deliverer(adk.AdkAgentRunner(a.runner))
            assert await deliverer.run_once() == 1
            assert await deliverer.run_once() == 0
            closing = [
                r.response
                for e in await a.history()
                for r in e.get_function_responses()
                if r.id == call.id and (r.response or {}).get("status") == "succeeded"
            ]
            assert closing == [
                {"status": "succeeded", "jobId": pending["jobId"], "result": {"approved": True}}
            ]
            assert texts(await a.history())[-1] == "ask_for_approval has finished: approved True."
            # A repeat after delivery still names the same job and starts nothing.
            assert (await tool.job_tool.invoke_async(args, ids))["jobId"] == pending["jobId"]
            assert len(submitted) == 1

    asyncio.run(scenario())


def test_adk_reexecuting_a_confirmed_tool_gets_the_same_job(db_url: str) -> None:
    """ADK runs a tool again after its confirmation: the same job, the body once, one delivery."""
    seen: list[object] = []

    def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
        """Ask for approval for the reimbursement."""
        seen.append(tool_context.tool_confirmation)
        tool_context.request_confirmation(hint="Send this to the approver?")
        return {"message": "Sent to Sean.", "ticketId": "T-1"}

    async def scenario() -> None:
        async with agent_with(
            db_url, lambda app: [adk.long_running_tool(app, ask_for_approval)]
        ) as a:
            turn = await a.ask(ASK)
            [call, confirm] = [c for e in turn for c in e.get_function_calls()]
            assert confirm.name == "adk_request_confirmation"
            yes = types.FunctionResponse(
                id=confirm.id, name=confirm.name, response={"confirmed": True}
            )
            message = types.Content(role="user", parts=[types.Part(function_response=yes)])
            async for _ in a.runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message
            ):
                pass
            await a.settled()
            answers = [
                dict(r.response or {})
                for e in await a.history()
                for r in e.get_function_responses()
                if r.id == call.id
            ]
            # ADK re-executed the tool for the same call id: both answers name one job.
            assert len(answers) == 2 and answers[0] == answers[1]
            [job] = await a.app.list_jobs_async()
            assert answers[0]["jobId"] == job.job_id and answers[0]["ticketId"] == "T-1"
            assert seen == [None]  # the body ran for the first execution only
            await a.app.complete_async(job.job_id, {"approved": True})
            deliverer = a.app.deliverer(adk.AdkAgentRunner(a.runner))
            assert await deliverer.run_once() == 1
            assert await deliverer.run_once() == 0
            closing = [
                r.id
                for e in await a.history()
                for r in e.get_function_responses()
                if (r.response or {}).get("status") == "succeeded"
            ]
            assert closing == [call.id]

    asyncio.run(scenario())


def test_a_keyless_recall_by_another_user_is_not_given_the_job(db_url: str) -> None:
    """The same session and call id under another user is that user's own call: a new job."""

    async def scenario() -> None:
        async with agent_with(db_url) as a:

            @a.app.long_running()
            def ask_for_approval(purpose: str, amount: float) -> str:
                """Ask for approval for the reimbursement."""
                return "sent"

            ana = CallIds(APP_NAME, "ana", SESSION, "call-1", "inv-1")
            bob = dataclasses.replace(ana, user_id="bob")
            args = {"purpose": "offsite", "amount": 5.0}
            first = await ask_for_approval.invoke_async(args, ana)
            assert (await ask_for_approval.invoke_async(args, ana)) == first
            other = await ask_for_approval.invoke_async(args, bob)
            assert other["jobId"] != first["jobId"]
            jobs = {j.job_id: j.user_id for j in await a.app.list_jobs_async()}
            assert jobs == {first["jobId"]: "ana", other["jobId"]: "bob"}

    asyncio.run(scenario())


# -- 6: the status words of ADK's samples --------------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {"status": "pending"},
            "I've started ask_for_approval. I'll let you know when it's done.",
        ),
        (
            {"status": "pending", "ticketId": "T-1"},
            "I've started ask_for_approval. (ticketId T-1) I'll let you know when it's done.",
        ),
        ({"status": "in-progress"}, "ask_for_approval is still running."),
        (
            {"status": "in_progress", "progress": "2 of 3"},
            "ask_for_approval is still running: 2 of 3.",
        ),
        (
            {"status": "In Progress", "message": "waiting"},
            "ask_for_approval is still running: waiting.",
        ),
        (
            {"status": "running", "progress": {"done": 2}},
            "ask_for_approval is still running: done 2.",
        ),
        ({"status": "approved"}, "ask_for_approval was approved."),
        (
            {"status": "approved", "approver": "Sean"},
            "ask_for_approval was approved: approver Sean.",
        ),
        (
            {"status": "rejected", "message": "over budget"},
            "ask_for_approval was rejected: over budget.",
        ),
        (
            {"status": "completed", "result": {"paid": 500}},
            "ask_for_approval has finished: paid 500.",
        ),
        ({"status": "SUCCESS"}, "ask_for_approval has finished."),
        ({"status": "succeeded", "result": "ok"}, "ask_for_approval has finished: ok."),
        ({"status": "ERROR", "message": "bad"}, "I couldn't run ask_for_approval: bad"),
        ({"status": "failed", "error": "boom"}, "ask_for_approval failed: boom."),
        ({"status": "canceled"}, "ask_for_approval was cancelled."),
        (
            {"status": "on_hold", "ticketId": "T-1"},
            "ask_for_approval reports status 'on_hold': ticketId T-1.",
        ),
        ({"ticketId": "T-1"}, "ask_for_approval answered: ticketId T-1."),
    ],
)
def test_the_scripted_reply_knows_adks_status_words(body: dict[str, Any], said: str) -> None:
    """Each status word of ADK's samples gets a fitting reply; an unknown one is not a failure."""
    text = default_reply(FunctionResponse("c1", "ask_for_approval", body))
    assert text == said
    assert "failed" not in text or body.get("status") == "failed"


def test_adks_own_approval_sample_runs_through_in_progress_to_approved() -> None:
    """ADK's sample tool, resumed with in-progress and then approved: the model follows each."""

    def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
        """Ask for approval for the reimbursement."""
        return {"status": "pending", "amount": amount, "ticketId": "reimbursement-ticket-001"}

    async def scenario() -> None:
        model = RecordingLlm(rules=RULES)
        sessions = InMemorySessionService()
        runner = Runner(
            app=AdkApp(
                name=APP_NAME,
                root_agent=LlmAgent(
                    name=AGENT, model=model, tools=[LongRunningFunctionTool(ask_for_approval)]
                ),
            ),
            session_service=sessions,
        )
        await sessions.create_session(app_name=APP_NAME, user_id=USER, session_id=SESSION)

        async def send(content: types.Content) -> list[Event]:
            return [
                e
                async for e in runner.run_async(
                    user_id=USER, session_id=SESSION, new_message=content
                )
            ]

        try:
            turn = await send(types.Content(role="user", parts=[types.Part(text=ASK)]))
            call, _ = call_and_pending(turn)
            said = texts(turn)
            for status in ("in-progress", "approved"):
                response = types.FunctionResponse(
                    id=call.id, name=call.name, response={"status": status, "approver": "Sean"}
                )
                turn = await send(
                    types.Content(role="user", parts=[types.Part(function_response=response)])
                )
                said += texts(turn)
            assert said == [
                "I've started ask_for_approval. (amount 500.0, ticketId "
                "reimbursement-ticket-001) I'll let you know when it's done.",
                "ask_for_approval is still running: approver Sean.",
                "ask_for_approval was approved: approver Sean.",
            ]
        finally:
            await runner.close()

    asyncio.run(scenario())
