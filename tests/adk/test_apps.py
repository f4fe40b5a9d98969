"""Several ADK apps on one longcall database: each app's answers go to its own sessions.

``adk api_server --extra_plugins longcall.adk.LongcallPlugin`` serves every app of an agents
folder with one ``LONGCALL_DATABASE_URL``. Here two real google-adk apps, ``exports`` and
``reimburse`` (offline scripted models), share one ADK session store and one longcall
database (SQLite and PostgreSQL), and their users talk in sessions of the same user and
session id, which ADK keeps apart by app. A worker serves the apps of the runners it is
given and leaves the others' jobs alone; an orphaned job is delivered again once its cause
is fixed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.sessions.base_session_service import BaseSessionService  # noqa: E402
from google.adk.tools.long_running_tool import LongRunningFunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from adk.session_files import sqlite_session_service  # noqa: E402
from longcall.core.jobs import CallIds, Delivery, Job  # noqa: E402
from longcall.store import NewJob  # noqa: E402
from longcall.worker import Worker  # noqa: E402

USER, SESSION = "u", "s"  # the same in both apps: two conversations all the same
WITHIN = 30.0


def export_data(export_type: str) -> dict[str, str]:
    """Exports the user's data as a file; the link arrives later."""
    return {"message": f"Exporting {export_type} data."}


def file_claim(amount: int) -> dict[str, str]:
    """Files an expense claim; a clerk approves it later."""
    return {"message": f"Filed a claim for {amount}."}


def ask_manager(amount: int) -> dict[str, str]:
    """Asks the manager; the answer is posted to longcall by another system."""
    return {"status": "pending"}


EXPORT_RULES = [
    longcall.Rule(
        r"export my data to (csv|json)", calls=[("export_data", lambda m: {"export_type": m[1]})]
    ),
]
CLAIM_RULES = [
    longcall.Rule(r"reimburse (\d+)", calls=[("file_claim", lambda m: {"amount": int(m[1])})]),
    longcall.Rule(
        r"ask my manager about (\d+)", calls=[("ask_manager", lambda m: {"amount": int(m[1])})]
    ),
]


class TwoApps:
    """One longcall App and two ADK apps over one ADK session store, as api_server has them."""

    def __init__(self, db_url: str, directory: Path) -> None:
        self.app = longcall.App(db_url)
        self.sessions = sqlite_session_service(directory / "adk-sessions.db")
        export = adk.long_running_tool(
            self.app, export_data, key="export:{session_id}:{export_type}"
        )
        claim = adk.long_running_tool(self.app, file_claim, key="claim:{session_id}:{amount}")
        self.runners = {
            "exports": self.runner("exports", "exporter", EXPORT_RULES, [export]),
            "reimburse": self.runner(
                "reimburse", "clerk", CLAIM_RULES, [claim, LongRunningFunctionTool(ask_manager)]
            ),
        }
        self.workers: list[asyncio.Task[None]] = []

    def runner(
        self,
        name: str,
        agent: str,
        rules: list[longcall.Rule],
        tools: list[Any],
        sessions: BaseSessionService | None = None,
    ) -> Runner:
        return Runner(
            app=AdkApp(
                name=name,
                root_agent=LlmAgent(name=agent, model=adk.ScriptedLlm(rules=rules), tools=tools),
                plugins=[adk.LongcallPlugin(self.app)],
            ),
            session_service=sessions or self.sessions,
        )

    def agent(self, name: str) -> Any:
        return adk.AdkAgentRunner(self.runners[name])

    async def say(self, name: str, text: str) -> None:
        runner = self.runners[name]
        if await self.sessions.get_session(app_name=name, user_id=USER, session_id=SESSION) is None:
            await self.sessions.create_session(app_name=name, user_id=USER, session_id=SESSION)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
            pass

    async def job_of(self, tool: str) -> Job:
        [job] = [j for j in await self.app.list_jobs_async() if j.tool_name == tool]
        return job

    async def start_calls(self) -> tuple[Job, Job]:
        """Each app's user asks for their long-running call; both jobs are started."""
        await self.say("exports", "Export my data to CSV")
        await self.say("reimburse", "Reimburse 12")
        return await self.job_of("export_data"), await self.job_of("file_claim")

    async def said(self, name: str) -> list[str]:
        """What the app's session holds: texts and function responses, in order."""
        session = await self.sessions.get_session(app_name=name, user_id=USER, session_id=SESSION)
        assert session is not None
        said = []
        for event in session.events:
            for part in event.content.parts or [] if event.content else []:
                if part.function_response:
                    status = (part.function_response.response or {}).get("status")
                    said.append(f"response {part.function_response.name} {status}")
                elif part.text:
                    said.append(part.text)
        return said

    def run(self, worker: Worker) -> Worker:
        self.workers.append(asyncio.create_task(worker.run(handle_signals=False)))
        return worker

    async def close(self, *workers: Worker) -> None:
        for worker in workers:
            worker.stop()
        await asyncio.wait_for(asyncio.gather(*self.workers), WITHIN)
        for runner in self.runners.values():
            await runner.close()
        self.app.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not await check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


async def delivery_of(app: longcall.App, job_id: str, delivery: Delivery) -> None:
    async def reached() -> bool:
        return (await app.get_job_async(job_id)).delivery is delivery

    await eventually(reached, f"job {job_id} {delivery}")


def run(db_url: str, directory: Path, body: Callable[[TwoApps], Awaitable[None]]) -> None:
    async def main() -> None:
        apps = TwoApps(db_url, directory)
        await body(apps)

    asyncio.run(main())


# -- one worker per app ----------------------------------------------------------------------


def test_a_worker_for_one_app_leaves_the_other_apps_jobs_alone(db_url: str, tmp_path: Path) -> None:
    """The exports worker delivers the export and never touches reimburse's claim (which it
    used to orphan for good); the reimburse worker, started later, delivers the claim."""

    async def body(t: TwoApps) -> None:
        export, claim = await t.start_calls()
        assert (export.app_name, claim.app_name) == ("exports", "reimburse")
        # Each worker in its own App on the same database, as two processes would have it.
        exports_app = longcall.App(db_url)
        exports = t.run(exports_app.worker(t.agent("exports"), poll_interval=0.05))
        await t.app.complete_async(claim.job_id, {"approved": True})
        await t.app.complete_async(export.job_id, {"url": "https://example.com/x.csv"})
        await delivery_of(t.app, export.job_id, Delivery.DELIVERED)
        await asyncio.sleep(0.3)  # several of the exports worker's polls
        waiting = await t.app.get_job_async(claim.job_id)
        assert (waiting.delivery, waiting.attempts, waiting.claim_holder) == (
            Delivery.READY,
            0,
            None,
        )

        reimburse_app = longcall.App(db_url)
        reimburse = t.run(reimburse_app.worker(t.agent("reimburse"), poll_interval=0.05))
        await delivery_of(t.app, claim.job_id, Delivery.DELIVERED)
        # Each answer is in its own app's session, once; neither holds the other's.
        exports_said, reimburse_said = await t.said("exports"), await t.said("reimburse")
        assert exports_said.count("response export_data succeeded") == 1
        assert reimburse_said.count("response file_claim succeeded") == 1
        assert not any("file_claim" in said for said in exports_said)
        assert not any("export_data" in said for said in reimburse_said)
        await t.close(exports, reimburse)
        exports_app.close()
        reimburse_app.close()
        assert exports.deliverer is not None and reimburse.deliverer is not None
        assert dict(exports.deliverer.stats) == {"delivered": 1}
        assert dict(reimburse.deliverer.stats) == {"delivered": 1}

    run(db_url, tmp_path, body)


# -- one worker for both ---------------------------------------------------------------------


def test_one_worker_serves_both_apps_each_through_its_own_runner(
    db_url: str, tmp_path: Path
) -> None:
    """app.worker(runners=[...]) delivers each app's job into that app's session; a user turn
    in one app's session holds back only that app's delivery, not the other app's session of
    the same user and id."""

    async def body(t: TwoApps) -> None:
        export, claim = await t.start_calls()
        worker = t.app.worker(
            runners=[t.agent("exports"), t.agent("reimburse")], poll_interval=0.05
        )
        assert [d.app_name for d in worker.deliverers] == ["exports", "reimburse"]
        async with t.app.session_turn(SESSION, app_name="exports", user_id=USER):
            t.run(worker)
            await t.app.complete_async(export.job_id, {"url": "https://example.com/x.csv"})
            await t.app.complete_async(claim.job_id, {"approved": True})
            await delivery_of(t.app, claim.job_id, Delivery.DELIVERED)
            await asyncio.sleep(0.2)
            held_back = await t.app.get_job_async(export.job_id)
            assert (held_back.delivery, held_back.claim_holder) == (Delivery.READY, None)
        await delivery_of(t.app, export.job_id, Delivery.DELIVERED)
        assert "response export_data succeeded" in await t.said("exports")
        assert "response file_claim succeeded" in await t.said("reimburse")
        await t.close(worker)
        by_app = {d.app_name: dict(d.stats) for d in worker.deliverers}
        assert by_app == {"exports": {"delivered": 1}, "reimburse": {"delivered": 1}}

    run(db_url, tmp_path, body)


def test_a_worker_refuses_two_runners_for_one_app(db_url: str, tmp_path: Path) -> None:
    """Two runners for one app would race for its jobs: refused, naming the app."""

    async def body(t: TwoApps) -> None:
        with pytest.raises(ValueError, match="two runners for the app 'exports'"):
            t.app.worker(runners=[t.agent("exports"), t.agent("exports")])
        await t.close()

    run(db_url, tmp_path, body)


# -- orphans delivered again --------------------------------------------------------------


def test_an_orphaned_job_is_delivered_again_once_its_cause_is_fixed(
    db_url: str, tmp_path: Path
) -> None:
    """A reimburse worker started on the wrong session store orphans the claim ("no function
    call"); with the store fixed, redeliver makes it ready and the claim reaches its session."""

    async def body(t: TwoApps) -> None:
        _, claim = await t.start_calls()
        wrong = t.runner("reimburse", "clerk", CLAIM_RULES, [], sessions=InMemorySessionService())
        broken = t.run(t.app.worker(adk.AdkAgentRunner(wrong), poll_interval=0.05))
        await t.app.complete_async(claim.job_id, {"approved": True})
        await delivery_of(t.app, claim.job_id, Delivery.ORPHANED)
        orphaned = await t.app.get_job_async(claim.job_id)
        assert "has no function call" in (orphaned.last_error or "")
        broken.stop()
        await wrong.close()

        again = await t.app.redeliver_async(claim.job_id)
        assert (again.delivery, again.attempts, again.last_error) == (Delivery.READY, 0, None)
        [event] = [e for e in await t.app.job_events_async(claim.job_id) if e.kind == "redelivered"]
        assert event.data == {"delivery": "orphaned", "error": orphaned.last_error}

        fixed = t.run(t.app.worker(t.agent("reimburse"), poll_interval=0.05))
        await delivery_of(t.app, claim.job_id, Delivery.DELIVERED)
        assert (await t.said("reimburse")).count("response file_claim succeeded") == 1
        with pytest.raises(longcall.NotRedeliverable, match="its delivery is 'delivered'"):
            await t.app.redeliver_async(claim.job_id)
        await t.close(fixed)

    run(db_url, tmp_path, body)


def test_a_job_of_no_app_goes_to_the_app_that_claims_it_and_can_be_sent_to_another(
    db_url: str, tmp_path: Path
) -> None:
    """A job created without an app name (as over REST) is delivered by whichever app's worker
    claims it, and becomes that app's. Claimed by the wrong app it is orphaned, not lost:
    redeliver with the right app sends it there."""

    async def body(t: TwoApps) -> None:
        await t.say("reimburse", "Ask my manager about 40")
        session = await t.sessions.get_session(
            app_name="reimburse", user_id=USER, session_id=SESSION
        )
        assert session is not None
        [call] = [c for e in session.events for c in e.get_function_calls()]
        # What POST /v1/jobs without appName records.
        new = NewJob(
            "approval-40", "ask_manager", {}, CallIds(None, USER, SESSION, call.id, None), None
        )
        await t.app.in_thread(
            t.app.store.create_job, new, holder="http", dispatch_lease=0, dispatch=False
        )
        exports = t.run(t.app.worker(t.agent("exports"), poll_interval=0.05))
        await t.app.complete_async("approval-40", {"approved": True})
        await delivery_of(t.app, "approval-40", Delivery.ORPHANED)
        assert (await t.app.get_job_async("approval-40")).app_name == "exports"

        again = await t.app.redeliver_async("approval-40", app_name="reimburse")
        assert (again.app_name, again.delivery) == ("reimburse", Delivery.READY)
        await asyncio.sleep(0.3)  # the exports worker leaves it alone now
        assert (await t.app.get_job_async("approval-40")).delivery is Delivery.READY
        reimburse = t.run(t.app.worker(t.agent("reimburse"), poll_interval=0.05))
        await delivery_of(t.app, "approval-40", Delivery.DELIVERED)
        assert "response ask_manager succeeded" in await t.said("reimburse")
        await t.close(exports, reimburse)

    run(db_url, tmp_path, body)
