"""The worked example of a 19-minute report, on the real google-adk Runner and a fake clock.

10:00 a user asks for the Q3 EMEA sales report; the tool records job report:2026-Q3:EMEA with
a 10:45 deadline and returns pending. 10:05 an unrelated question is answered normally while
the call stays open. 10:19 the batch system reports completion; at 10:19:03 the resumer hands
the URL and row count to the model. 10:21 the same completion arrives again and changes
nothing. A second report (APAC) never finishes: the sweeper expires it at its deadline, the
model hears so once, and a late completion afterwards is a recorded no-op.
"""

from __future__ import annotations

import asyncio
import datetime as dt
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

APP_NAME, AGENT_NAME = "sales", "analyst"
USER, SESSION = "ana", "session-ana-1"
DAY = dt.datetime(2026, 11, 30, tzinfo=dt.UTC).timestamp()
# The report jobs of the demo's user, in her namespace.
EMEA, APAC = (longcall.job_id_for(f"report:2026-Q3:{r}", USER) for r in ("EMEA", "APAC"))
RESULT = {"url": "https://reports.example.com/2026-Q3-EMEA.csv", "rowCount": 48213}
FINAL_STATUSES = {"succeeded", "failed", "expired", "cancelled"}


def at(hh_mm_ss: str) -> float:
    """The fake clock's reading at a time of day on the example's day (UTC)."""
    h, m, s = (int(x) for x in hh_mm_ss.split(":"))
    return DAY + h * 3600 + m * 60 + s


def closing_responses(events: list[Event], call_id: str) -> list[dict[str, Any]]:
    """The responses in the session that close ``call_id`` (a terminal status)."""
    return [
        dict(r.response or {})
        for e in events
        for r in e.get_function_responses()
        if r.id == call_id and (r.response or {}).get("status") in FINAL_STATUSES
    ]


def texts(events: list[Event]) -> list[str]:
    return [
        "".join(p.text for p in e.content.parts if p.text)
        for e in events
        if e.author == AGENT_NAME and e.content and any(p.text for p in e.content.parts or [])
    ]


def test_the_nineteen_minute_report_on_adk(tmp_path: Path) -> None:
    """10:00 call, 10:05 other turn, 10:19 result once, 10:21 duplicate no-op, APAC expires."""

    async def scenario() -> None:
        clock = longcall.FakeClock(at("10:00:00"))
        app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}", clock=clock)
        batch_queue: list[str] = []

        def start_sales_report(
            quarter: str, region: str, job: longcall.JobHandle
        ) -> dict[str, Any]:
            """Starts a sales report build for a quarter (like 2026-Q3) and a region code."""
            batch_queue.append(job.id)  # the batch system takes the job id as idempotency key
            return {"message": "Report build started; typical time is 15-25 minutes."}

        tool = adk.long_running_tool(
            app, start_sales_report, key="report:{quarter}:{region}", deadline="45m"
        )
        model = adk.ScriptedLlm(
            rules=[
                longcall.Rule(
                    r"sales report for (\d{4}-Q[1-4]) (\w+)",
                    calls=[
                        (
                            "start_sales_report",
                            lambda m: {"quarter": m[1], "region": m[2].upper()},
                        )
                    ],
                ),
                longcall.Rule(r"vacation", reply="You have 12 vacation days left this year."),
            ]
        )
        sessions = InMemorySessionService()
        runner = Runner(
            app=AdkApp(
                name=APP_NAME,
                root_agent=LlmAgent(name=AGENT_NAME, model=model, tools=[tool]),
                plugins=[adk.LongcallPlugin(app)],
            ),
            session_service=sessions,
        )
        resumer = app.deliverer(adk.AdkAgentRunner(runner))
        sweeper = app.sweeper()
        await sessions.create_session(app_name=APP_NAME, user_id=USER, session_id=SESSION)

        async def ask(text: str) -> list[Event]:
            message = types.Content(role="user", parts=[types.Part(text=text)])
            return [
                e
                async for e in runner.run_async(
                    user_id=USER, session_id=SESSION, new_message=message
                )
            ]

        async def history() -> list[Event]:
            session = await sessions.get_session(
                app_name=APP_NAME, user_id=USER, session_id=SESSION
            )
            assert session is not None
            return list(session.events)

        try:
            # 10:00 the user asks; the tool records the whole join and returns pending.
            turn = await ask("Please build the sales report for 2026-Q3 EMEA.")
            [call] = [c for e in turn for c in e.get_function_calls()]
            assert (call.name, call.args) == (
                "start_sales_report",
                {"quarter": "2026-Q3", "region": "EMEA"},
            )
            assert set().union(*(e.long_running_tool_ids or set() for e in turn)) == {call.id}
            [pending] = [r.response for e in turn for r in e.get_function_responses()]
            assert pending == {
                "status": "pending",
                "jobId": EMEA,
                "message": "Report build started; typical time is 15-25 minutes.",
            }
            assert texts(turn) == [
                "I've started start_sales_report. Report build started; typical time is "
                "15-25 minutes. I'll let you know when it's done."
            ]
            job = await app.get_job_async(EMEA)
            assert job.ids == longcall.CallIds(
                APP_NAME, USER, SESSION, call.id, turn[0].invocation_id
            )
            assert job.state is longcall.JobState.STARTED
            assert (job.created_at, job.deadline_at) == (at("10:00:00"), at("10:45:00"))
            assert batch_queue == [EMEA]

            # 10:05 an unrelated question is answered normally; the call stays open.
            clock.set(at("10:05:00"))
            turn = await ask("How many vacation days do I have left?")
            assert [e.get_function_calls() for e in turn] == [[]]
            assert texts(turn) == ["You have 12 vacation days left this year."]
            assert await resumer.run_once() == 0
            job = await app.get_job_async(EMEA)
            assert (job.state, job.delivery) == (longcall.JobState.STARTED, longcall.Delivery.NONE)
            assert closing_responses(await history(), call.id) == []

            # 10:19 the batch system reports completion; 10:19:03 the model gets the result.
            clock.set(at("10:19:00"))
            outcome = await app.complete_async(EMEA, RESULT)
            assert outcome.changed is True
            assert outcome.job.state is longcall.JobState.SUCCEEDED
            assert outcome.job.finished_at == at("10:19:00")
            clock.set(at("10:19:03"))
            before = len(await history())
            assert await resumer.run_once() == 1
            events = await history()
            resumed = events[before:]
            assert [(e.author, e.invocation_id) for e in resumed] == [
                ("user", job.invocation_id),
                (AGENT_NAME, job.invocation_id),
            ]
            [response] = resumed[0].get_function_responses()
            assert (response.id, response.name) == (call.id, "start_sales_report")
            assert response.response == {"status": "succeeded", "jobId": EMEA, "result": RESULT}
            assert texts(resumed) == [
                "start_sales_report has finished: url "
                "https://reports.example.com/2026-Q3-EMEA.csv, rowCount 48213."
            ]
            job = await app.get_job_async(EMEA)
            assert (job.delivery, job.delivered_at) == (longcall.Delivery.DELIVERED, at("10:19:03"))
            assert dict(resumer.stats) == {"delivered": 1}

            # 10:21 the same webhook, retried: nothing changes and nothing is delivered.
            clock.set(at("10:21:00"))
            again = await app.complete_async(EMEA, RESULT)
            assert again.changed is False
            assert again.job.result == RESULT and again.job.finished_at == at("10:19:00")
            assert await resumer.run_once() == 0
            events = await history()
            assert len(events) == before + 2
            assert closing_responses(events, call.id) == [
                {"status": "succeeded", "jobId": EMEA, "result": RESULT}
            ]
            assert [e.kind for e in await app.job_events_async(EMEA)] == ["succeeded", "ignored"]
            assert dict(resumer.stats) == {"delivered": 1}

            # A second report that never finishes: the sweeper answers at its deadline.
            clock.set(at("10:22:00"))
            turn = await ask("Also the sales report for 2026-Q3 APAC, please.")
            [apac_call] = [c for e in turn for c in e.get_function_calls()]
            apac = await app.get_job_async(APAC)
            assert apac.call_id == apac_call.id
            assert apac.invocation_id == turn[0].invocation_id != job.invocation_id
            assert apac.deadline_at == at("11:07:00")
            assert batch_queue == [EMEA, APAC]
            clock.set(at("11:06:59"))
            assert await sweeper.run_once() == []
            assert await resumer.run_once() == 0
            clock.set(at("11:07:00"))
            expired = await sweeper.run_once()
            assert [(j.job_id, j.state) for j in expired] == [(APAC, longcall.JobState.EXPIRED)]
            expired_body = {
                "status": "expired",
                "jobId": APAC,
                "message": "No result within 45 minutes.",
                "deadlineAt": at("11:07:00"),
            }
            before = len(await history())
            assert await resumer.run_once() == 1
            assert await resumer.run_once() == 0
            events = await history()
            assert len(events) == before + 2
            assert closing_responses(events, apac_call.id) == [expired_body]
            assert texts(events[before:]) == [
                "Sorry, start_sales_report did not finish in time (No result within 45 "
                "minutes.). Shall I start it again?"
            ]
            assert dict(resumer.stats) == {"delivered": 2}

            # 11:10 a late result for the expired report is recorded and changes nothing.
            clock.set(at("11:10:00"))
            late = await app.complete_async(APAC, {"url": "late"})
            assert late.changed is False
            apac = await app.get_job_async(APAC)
            assert (apac.state, apac.delivery) == (
                longcall.JobState.EXPIRED,
                longcall.Delivery.DELIVERED,
            )
            assert apac.result == {
                "message": "No result within 45 minutes.",
                "deadlineAt": at("11:07:00"),
            }
            log = await app.job_events_async(APAC)
            assert [e.kind for e in log] == ["expired", "ignored"]
            assert log[-1].data == {
                "state": "succeeded",
                "result": {"url": "late"},
                "reason": "late: after the deadline",
                "late": True,
                "deadlineAt": at("11:07:00"),
            }
            assert log[-1].created_at == at("11:10:00")
            assert await resumer.run_once() == 0
            assert len(await history()) == before + 2

            # In all: two calls, each closed exactly once, and the EMEA result still stands.
            events = await history()
            closing = [
                r.id
                for e in events
                for r in e.get_function_responses()
                if (r.response or {}).get("status") in FINAL_STATUSES
            ]
            assert sorted(closing) == sorted([call.id, apac_call.id])
            assert (await app.get_job_async(EMEA)).result == RESULT
        finally:
            app.close()

    asyncio.run(scenario())
