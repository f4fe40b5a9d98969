"""ADK sessions under longcall: serialised runs, restarts, orphans, duplicates, a broken store.

Every scenario runs against a real google-adk Runner on each of its session services
(in memory, ``SqliteSessionService`` and ``DatabaseSessionService`` over aiosqlite). The model
is longcall's scripted one, made slow on demand by a gate, so "a resume arrives while a user
turn is in the model" is a fact the test arranges, not a race it hopes for.

The module is also the child process of the restart test: ``python test_sessions.py call|resume
KIND DIR`` builds the same agent over the same files and prints one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
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
from google.adk.sessions.base_session_service import BaseSessionService  # noqa: E402
from google.adk.tools.long_running_tool import LongRunningFunctionTool  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

if __name__ == "__main__":  # the restart tests run this file as a script: import as pytest does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adk.session_files import sqlite_session_service  # noqa: E402
from longcall.agents import FunctionResponse, Message  # noqa: E402
from longcall.core.jobs import CallIds, Delivery, JobState, job_id_for  # noqa: E402
from longcall.errors import StoreUnavailable  # noqa: E402
from longcall.jobs.delivery import response_of  # noqa: E402

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
try:
    import sqlalchemy  # noqa: F401

    HAS_SQLALCHEMY = True
except ImportError:  # pragma: no cover - depends on the installed extras
    HAS_SQLALCHEMY = False
DATABASE = pytest.param(
    "database",
    marks=pytest.mark.skipif(
        not HAS_SQLALCHEMY and not IN_CI,
        reason="DatabaseSessionService needs sqlalchemy[asyncio]: pip install --group test",
    ),
)
SERVICES = ["memory", "sqlite", DATABASE]
PERSISTENT = ["sqlite", DATABASE]
APP, USER, SESSION = "exports", "u", "s"
URL = "https://example.com/export.csv"
GATE_TIMEOUT = 20.0

STARTED = "I've started export_data. Exporting csv data. I'll let you know when it's done."
FINISHED = f"export_data has finished: url {URL}."
CALL_TURN = [
    ("user", "Export my data to CSV"),
    ("exporter", "call export_data"),
    ("exporter", "response export_data pending"),
    ("exporter", STARTED),
]
RESUME = [("user", "response export_data succeeded"), ("exporter", FINISHED)]


def export_data(export_type: str) -> dict[str, str]:
    """Exports the user's data as a file; the link arrives later."""
    return {"message": f"Exporting {export_type} data."}


RULES = (
    longcall.Rule(
        r"export my data to (csv|json)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    ),
    longcall.Rule(r"slow question", reply="Here is the slow answer."),
    longcall.Rule(r"hello", reply="Hi there."),
)


class GatedLlm(adk.ScriptedLlm):
    """The scripted model, slow on demand: a request whose last message matches ``hold``
    waits at ``gate`` (and says so through ``entered``) before it answers."""

    hold: Any = None
    gate: Any = None
    entered: Any = None
    requests: list[list[types.Content]] = Field(default_factory=list)

    def slow_when(self, hold: Callable[[types.Content], bool]) -> None:
        self.hold, self.gate, self.entered = hold, asyncio.Event(), asyncio.Event()

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> Any:
        contents = list(llm_request.contents or [])
        self.requests.append(contents)
        if self.hold is not None and contents and self.hold(contents[-1]):
            self.entered.set()
            await asyncio.wait_for(self.gate.wait(), GATE_TIMEOUT)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def text_of(content: types.Content) -> str:
    return "".join(p.text for p in content.parts or [] if p.text)


def statuses(content: types.Content) -> list[str]:
    return [
        str((p.function_response.response or {}).get("status"))
        for p in content.parts or []
        if p.function_response
    ]


def describe(event: Event) -> tuple[str, str]:
    """An event as (author, what it says), for comparing whole histories."""
    said = []
    for part in event.content.parts or [] if event.content else []:
        if part.function_call:
            said.append(f"call {part.function_call.name}")
        elif part.function_response:
            status = (part.function_response.response or {}).get("status")
            said.append(f"response {part.function_response.name} {status}")
        elif part.text:
            said.append(part.text)
    return event.author, " | ".join(said)


def make_sessions(kind: str, directory: Path) -> BaseSessionService:
    if kind == "memory":
        return InMemorySessionService()
    if kind == "sqlite":
        return sqlite_session_service(directory / "adk-sessions.db")
    from google.adk.sessions import DatabaseSessionService

    return DatabaseSessionService(f"sqlite+aiosqlite:///{directory / 'adk-sessions-sa.db'}")


class Harness:
    """A longcall App, an ADK Runner with the plugin, and one of ADK's session services."""

    def __init__(
        self,
        kind: str,
        directory: Path,
        *,
        app: longcall.App | None = None,
        plugin: adk.LongcallPlugin | None = None,
        tools: list[Any] | None = None,
    ) -> None:
        self.app = app or longcall.App(f"sqlite:///{directory / 'jobs.db'}")
        self.llm = GatedLlm(rules=RULES)
        self.tool = adk.long_running_tool(
            self.app, export_data, key="export:{session_id}:{export_type}"
        )
        self.sessions = make_sessions(kind, directory)
        self.plugin = plugin or adk.LongcallPlugin(self.app)
        self.runner = Runner(
            app=AdkApp(
                name=APP,
                root_agent=LlmAgent(
                    name="exporter", model=self.llm, tools=[self.tool] if tools is None else tools
                ),
                plugins=[self.plugin],
            ),
            session_service=self.sessions,
        )
        self.agent = adk.AdkAgentRunner(self.runner)

    async def create_session(self) -> None:
        await self.sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)

    async def say(self, text: str) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            e
            async for e in self.runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message
            )
        ]

    async def history(self) -> list[tuple[str, str]]:
        session = await self.sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        return [describe(e) for e in session.events]

    async def close(self) -> None:
        await self.runner.close()
        closing = getattr(self.sessions, "close", None)
        if closing is not None:
            result = closing()
            if inspect.isawaitable(result):
                await result
        self.app.close()


def scenario(kind: str, directory: Path, body: Callable[[Harness], Awaitable[None]]) -> None:
    """Run ``body`` on a fresh harness with its session created, and close everything."""

    async def main() -> None:
        harness = Harness(kind, directory)
        try:
            await harness.create_session()
            await body(harness)
        finally:
            await harness.close()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def stale_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "stale" in r.getMessage().lower()]


# -- serialisation ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", SERVICES)
def test_a_resume_arriving_during_a_slow_user_turn_waits_for_it(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A completion during a slow user turn is delivered once, after the turn, not inside it."""

    async def body(h: Harness) -> None:
        await h.say("Export my data to CSV")
        [job] = await h.app.list_jobs_async()
        h.llm.slow_when(lambda c: "slow" in text_of(c))
        turn = asyncio.create_task(h.say("A slow question"))
        await asyncio.wait_for(h.llm.entered.wait(), GATE_TIMEOUT)

        resumer = h.app.deliverer(h.agent, poll_interval=0.05)
        stop = asyncio.Event()
        loop = asyncio.create_task(resumer.run(stop))
        assert (await h.app.complete_async(job.job_id, {"url": URL})).changed
        await asyncio.sleep(0.3)  # the commit's wake-up and several polls have passed
        waiting = await h.app.get_job_async(job.job_id)
        assert (waiting.delivery, waiting.attempts, waiting.claim_holder) == (
            Delivery.READY,
            0,
            None,
        )
        assert resumer.stats == {}
        assert len(await h.history()) == len(CALL_TURN) + 1  # only the slow question so far

        h.llm.gate.set()
        turn_events = await turn
        assert [describe(e) for e in turn_events] == [("exporter", "Here is the slow answer.")]

        async def delivered() -> bool:
            return (await h.app.get_job_async(job.job_id)).delivery is Delivery.DELIVERED

        await eventually(delivered)
        stop.set()
        await loop
        assert resumer.stats == {"delivered": 1}
        assert await resumer.run_once() == 0
        assert await h.history() == [
            *CALL_TURN,
            ("user", "A slow question"),
            ("exporter", "Here is the slow answer."),
            *RESUME,
        ]

    scenario(kind, tmp_path, body)
    assert stale_warnings(caplog) == []


@pytest.mark.parametrize("kind", SERVICES)
def test_a_user_turn_arriving_during_a_resume_waits_for_it(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A message sent while a resume runs is stored after it and answered, with no stale error."""

    async def body(h: Harness) -> None:
        await h.say("Export my data to CSV")
        [job] = await h.app.list_jobs_async()
        h.llm.slow_when(lambda c: statuses(c) == ["succeeded"])
        await h.app.complete_async(job.job_id, {"url": URL})
        resumer = h.app.deliverer(h.agent)
        resume = asyncio.create_task(resumer.run_once())
        await asyncio.wait_for(h.llm.entered.wait(), GATE_TIMEOUT)
        during = await h.history()
        assert during == [*CALL_TURN, RESUME[0]]

        turn = asyncio.create_task(h.say("hello"))
        await asyncio.sleep(0.3)
        assert not turn.done()
        assert await h.history() == during  # the user's message waits, unstored

        h.llm.gate.set()
        assert await resume == 1
        turn_events = await turn
        assert [describe(e) for e in turn_events] == [("exporter", "Hi there.")]
        assert await h.history() == [
            *CALL_TURN,
            *RESUME,
            ("user", "hello"),
            ("exporter", "Hi there."),
        ]
        # The turn ran on the session as the resume left it: its model saw the result.
        hello_request = h.llm.requests[-1]
        assert text_of(hello_request[-1]) == "hello"
        assert [s for c in hello_request for s in statuses(c)] == ["succeeded"]
        assert resumer.stats == {"delivered": 1}
        assert (await h.app.get_job_async(job.job_id)).delivery is Delivery.DELIVERED

    scenario(kind, tmp_path, body)
    assert stale_warnings(caplog) == []


@pytest.mark.parametrize("kind", SERVICES)
def test_a_cancelled_user_turn_does_not_keep_the_session_locked(kind: str, tmp_path: Path) -> None:
    """A user turn cancelled mid-model gives its session lease back, and the resume goes out."""

    async def body(h: Harness) -> None:
        await h.say("Export my data to CSV")
        [job] = await h.app.list_jobs_async()
        h.llm.slow_when(lambda c: "slow" in text_of(c))
        turn = asyncio.create_task(h.say("A slow question"))
        await asyncio.wait_for(h.llm.entered.wait(), GATE_TIMEOUT)
        await h.app.complete_async(job.job_id, {"url": URL})
        resumer = h.app.deliverer(h.agent)
        assert await resumer.run_once() == 0  # the turn holds the session
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await turn

        async def resumed() -> bool:
            return await resumer.run_once() == 1

        await eventually(resumed, within=5.0)
        assert resumer.stats == {"delivered": 1}
        assert (await h.history())[-2:] == RESUME

    scenario(kind, tmp_path, body)


def test_a_user_turn_longer_than_its_lease_keeps_the_session(tmp_path: Path) -> None:
    """The plugin's heartbeat renews the lease of a turn in progress: a resume waiting for
    the session does not go out in the middle of a turn that outlasts the lease."""

    async def main() -> None:
        app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}", session_lease=0.6)
        h = Harness("memory", tmp_path, app=app)
        try:
            await h.create_session()
            await h.say("Export my data to CSV")
            [job] = await app.list_jobs_async()
            await app.complete_async(job.job_id, {"url": URL})
            h.llm.slow_when(lambda c: "slow" in text_of(c))
            turn = asyncio.create_task(h.say("A slow question"))
            await asyncio.wait_for(h.llm.entered.wait(), GATE_TIMEOUT)
            resumer = app.deliverer(h.agent)
            for _ in range(6):  # 1.8 s: three leases' worth
                await asyncio.sleep(0.3)
                assert await resumer.run_once() == 0
            h.llm.gate.set()
            await turn

            async def resumed() -> bool:
                return await resumer.run_once() == 1

            await eventually(resumed, within=5.0)
            history = await h.history()
            assert history[-4:] == [
                ("user", "A slow question"),
                ("exporter", "Here is the slow answer."),
                *RESUME,
            ]
        finally:
            await h.close()

    asyncio.run(main())


def test_back_to_back_turns_on_a_session_follow_its_release(tmp_path: Path) -> None:
    """The run does not wait for its lease's release, but the next turn on the same session
    in this process waits for it instead of finding the session busy and backing off."""

    async def main() -> None:
        h = Harness("memory", tmp_path)
        try:
            await h.create_session()
            taken: list[bool] = []
            take = h.app.store.take_session

            def counted(*args: Any, **kwargs: Any) -> bool:
                taken.append(take(*args, **kwargs))
                return taken[-1]

            release = h.app.store.release_session

            def slow_release(*args: Any, **kwargs: Any) -> None:
                time.sleep(0.05)  # a release still committing when the next turn starts
                release(*args, **kwargs)

            h.app.store.take_session = counted  # type: ignore[method-assign]
            h.app.store.release_session = slow_release  # type: ignore[method-assign]
            for _ in range(5):
                await h.say("hello")
            assert taken == [True] * 5  # never refused: each waited for the last release
            await h.plugin.settled()
            assert await h.app.in_thread(leases, tmp_path / "jobs.db") == []
        finally:
            await h.close()

    asyncio.run(main())


# -- restarts and orphans ---------------------------------------------------------------


def run_phase(phase: str, kind: str, directory: Path) -> dict[str, Any]:
    """Run this module as a separate process for one phase; return the JSON it printed."""
    out = subprocess.run(
        [sys.executable, __file__, phase, kind, str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


async def child(phase: str, kind: str, directory: Path) -> dict[str, Any]:
    """One phase of the restart test, in its own process."""
    h = Harness(kind, directory)
    try:
        if phase == "call":
            await h.create_session()
            await h.say("Export my data to CSV")
            [job] = await h.app.list_jobs_async()
            return {"job_id": job.job_id, "call_id": job.call_id}
        resumer = h.app.deliverer(h.agent)
        handled = await resumer.run_once()
        return {"handled": handled, "stats": dict(resumer.stats)}
    finally:
        await h.close()


@pytest.mark.parametrize("kind", PERSISTENT)
def test_a_new_process_resumes_a_call_made_before_a_restart(kind: str, tmp_path: Path) -> None:
    """A call made by one process is resumed, once, by a new process over the same files."""
    called = run_phase("call", kind, tmp_path)
    assert called["job_id"] == job_id_for("export:s:csv", USER)
    assert called["call_id"].startswith("adk-")
    with longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}") as app:
        assert app.complete(called["job_id"], {"url": URL}).changed
    assert run_phase("resume", kind, tmp_path) == {"handled": 1, "stats": {"delivered": 1}}

    async def body(h: Harness) -> None:
        # A third App, Runner and session service find nothing left to do.
        assert await h.app.deliverer(h.agent).run_once() == 0
        assert await h.history() == [*CALL_TURN, *RESUME]
        job = await h.app.get_job_async(called["job_id"])
        assert (job.delivery, job.call_id) == (Delivery.DELIVERED, called["call_id"])

    async def main() -> None:
        h = Harness(kind, tmp_path)
        try:
            await body(h)
        finally:
            await h.close()

    asyncio.run(main())


def test_a_restart_that_lost_an_in_memory_session_orphans_the_job_visibly(
    tmp_path: Path,
) -> None:
    """With InMemorySessionService a restart loses the call: the job is ORPHANED, not retried."""
    called = run_phase("call", "memory", tmp_path)
    with longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}") as app:
        assert app.complete(called["job_id"], {"url": URL}).changed
    assert run_phase("resume", "memory", tmp_path) == {"handled": 1, "stats": {"orphaned": 1}}
    with longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}") as app:
        job = app.get_job(called["job_id"])
        assert (job.state, job.delivery, job.attempts) == (JobState.SUCCEEDED, Delivery.ORPHANED, 1)
        assert called["call_id"] in (job.last_error or "")
        assert [j.job_id for j in app.list_jobs(delivery=Delivery.ORPHANED)] == [job.job_id]


@pytest.mark.parametrize("kind", SERVICES)
def test_an_unknown_call_id_orphans_the_job_and_is_never_retried(kind: str, tmp_path: Path) -> None:
    """A job joined to a call the session never held is marked ORPHANED once, nothing stored."""

    async def body(h: Harness) -> None:
        await h.say("hello")
        ids = CallIds(APP, USER, SESSION, "adk-no-such-call", "e-no-such-invocation")
        pending = await h.tool.job_tool.invoke_async({"export_type": "json"}, ids)
        assert pending["status"] == "pending"
        await h.app.complete_async(pending["jobId"], {"url": URL})
        before = await h.history()
        resumer = h.app.deliverer(h.agent, retry_base=0)
        assert await resumer.run_once() == 1
        assert resumer.stats == {"orphaned": 1}
        job = await h.app.get_job_async(pending["jobId"])
        assert (job.delivery, job.attempts, job.claim_holder) == (Delivery.ORPHANED, 1, None)
        assert "adk-no-such-call" in (job.last_error or "")
        assert await resumer.run_once() == 0
        assert await resumer.run_once() == 0
        assert (await h.app.get_job_async(job.job_id)).attempts == 1
        assert await h.history() == before == [("user", "hello"), ("exporter", "Hi there.")]

    scenario(kind, tmp_path, body)


# -- duplicates and ids ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", SERVICES)
def test_a_duplicate_completion_is_never_delivered_twice(kind: str, tmp_path: Path) -> None:
    """A second completion changes nothing, and a response already in the session is not resent."""

    async def body(h: Harness) -> None:
        await h.say("Export my data to CSV")
        [job] = await h.app.list_jobs_async()
        assert (await h.app.complete_async(job.job_id, {"url": URL})).changed
        again = await h.app.complete_async(job.job_id, {"url": "https://example.com/other"})
        assert not again.changed and again.job.result == {"url": URL}
        # A holder that delivered and crashed before marking the job: the response is in
        # the session, the job still says ready.
        done = await h.app.get_job_async(job.job_id)
        message = Message(function_responses=(response_of(done),))
        sent = [e async for e in h.agent.run(user_id=USER, session_id=SESSION, message=message)]
        assert [e.text for e in sent] == [FINISHED]
        assert (await h.app.get_job_async(job.job_id)).delivery is Delivery.READY
        assert await h.agent.has_function_response(
            user_id=USER, session_id=SESSION, call_id=job.call_id
        )

        resumer = h.app.deliverer(h.agent)
        assert await resumer.run_once() == 1
        assert resumer.stats == {"already_in_session": 1}
        assert (await h.app.get_job_async(job.job_id)).delivery is Delivery.DELIVERED
        assert await resumer.run_once() == 0
        assert await h.history() == [*CALL_TURN, *RESUME]

    scenario(kind, tmp_path, body)


@pytest.mark.parametrize("kind", SERVICES)
def test_a_response_is_never_sent_without_its_call_id(kind: str, tmp_path: Path) -> None:
    """Every response handed to ADK carries the call id; a job without one is never sent."""

    async def body(h: Harness) -> None:
        sent: list[types.Content] = []
        run_async = h.runner.run_async

        def spy(**kwargs: Any) -> Any:
            sent.append(kwargs["new_message"])
            return run_async(**kwargs)

        h.runner.run_async = spy  # type: ignore[method-assign]
        await h.say("Export my data to CSV")
        [job] = await h.app.list_jobs_async()
        # A job that knows its session but not its call stays unsent, whatever happens.
        no_call = await h.tool.job_tool.invoke_async(
            {"export_type": "json"}, CallIds(APP, USER, SESSION)
        )
        await h.app.complete_async(no_call["jobId"], {"url": URL})
        await h.app.complete_async(job.job_id, {"url": URL})
        resumer = h.app.deliverer(h.agent)
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        orphan = await h.app.get_job_async(no_call["jobId"])
        assert (orphan.call_id, orphan.delivery, orphan.attempts) == (None, Delivery.NONE, 0)
        responses = [
            p.function_response for c in sent for p in c.parts or [] if p.function_response
        ]
        assert [(r.id, r.name) for r in responses] == [(job.call_id, "export_data")]

        # The runner itself refuses a response without an id (ADK would drop it silently).
        empty = Message(function_responses=(FunctionResponse("", "export_data", {"x": 1}),))
        before = await h.history()
        with pytest.raises(ValueError, match="without its call id"):
            async for _ in h.agent.run(user_id=USER, session_id=SESSION, message=empty):
                pass
        assert await h.history() == before == [*CALL_TURN, *RESUME]

    scenario(kind, tmp_path, body)


# -- the plugin ---------------------------------------------------------------------------


class BrokenStore:
    """A store whose every operation fails as a dead database would."""

    def __init__(self) -> None:
        self.ready_listeners: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        def broken(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable(f"the database is down ({name})")

        return broken


def start_export(export_type: str) -> dict[str, str]:
    """Starts an export elsewhere; answers with the job that tracks it."""
    return {"status": "pending", "jobId": f"elsewhere:{export_type}"}


@pytest.mark.parametrize("kind", SERVICES)
def test_the_plugin_never_raises_into_a_run_when_its_database_is_broken(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With every store call failing, the user's turns still complete and are stored."""

    async def main() -> None:
        h = Harness(
            kind,
            tmp_path,
            tools=[LongRunningFunctionTool(start_export)],
        )
        h.llm.rules = (
            longcall.Rule(
                r"export my data to (csv|json)",
                calls=[("start_export", lambda m: {"export_type": m[1].lower()})],
            ),
            *RULES[1:],
        )
        store = h.app.store
        h.app.store = BrokenStore()  # type: ignore[assignment]
        try:
            await h.create_session()
            await h.say("Export my data to CSV")
            await h.say("hello")
            history = await h.history()
        finally:
            h.app.store = store
            await h.close()
        assert history == [
            ("user", "Export my data to CSV"),
            ("exporter", "call start_export"),
            ("exporter", "response start_export pending"),
            ("exporter", "I've started start_export. I'll let you know when it's done."),
            ("user", "hello"),
            ("exporter", "Hi there."),
        ]

    with caplog.at_level(logging.ERROR, logger="longcall.adk"):
        asyncio.run(main())
    messages = [r.getMessage() for r in caplog.records if r.name == "longcall.adk"]
    assert messages.count("longcall could not take the session lease; the run goes on") == 2
    assert "longcall could not record the calls of an event" in messages


def test_the_plugin_never_raises_when_its_database_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``LongcallPlugin()`` whose LONGCALL_DATABASE_URL cannot be opened lets the turn run."""
    monkeypatch.setenv("LONGCALL_DATABASE_URL", f"sqlite:///{tmp_path / 'missing' / 'x.db'}")

    async def main() -> list[tuple[str, str]]:
        app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}")
        h = Harness("memory", tmp_path, app=app, plugin=adk.LongcallPlugin())
        try:
            await h.create_session()
            await h.say("hello")
            return await h.history()
        finally:
            await h.close()

    with caplog.at_level(logging.ERROR, logger="longcall.adk"):
        assert asyncio.run(main()) == [("user", "hello"), ("exporter", "Hi there.")]
    messages = [r.getMessage() for r in caplog.records if r.name == "longcall.adk"]
    assert messages == ["longcall could not take the session lease; the run goes on"]


def wait_until(done: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    give_up_at = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < give_up_at, f"timed out waiting until {what}"
        time.sleep(0.01)


def leases(db: Path) -> list[tuple[str, str, str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT session_id, kind, holder FROM lc_session_leases WHERE holder <> ''"
        ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


@pytest.mark.parametrize("kind", SERVICES)
def test_the_plugin_without_arguments_configures_itself_from_the_environment(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LongcallPlugin()`` (as ``--extra_plugins`` builds it) leases on LONGCALL_DATABASE_URL."""
    db = tmp_path / "from-env.db"
    url = f"sqlite:///{db}"
    monkeypatch.setenv("LONGCALL_DATABASE_URL", url)

    async def main() -> None:
        plugin = adk.LongcallPlugin()
        assert plugin.name == "longcall"
        h = Harness(kind, tmp_path, app=longcall.App(), plugin=plugin)
        try:
            assert plugin.app.url == h.app.url == url
            await h.create_session()
            h.llm.slow_when(lambda c: "slow" in text_of(c))
            turn = asyncio.create_task(h.say("A slow question"))
            await asyncio.wait_for(h.llm.entered.wait(), GATE_TIMEOUT)
            [(session_id, lease_kind, holder)] = leases(db)
            assert (session_id, lease_kind) == (SESSION, "turn") and ":adk-turn:" in holder
            h.llm.gate.set()
            await turn
            await plugin.settled()  # the run does not wait for its lease's release
            assert leases(db) == []
            await h.say("Export my data to CSV")
            [job] = await h.app.list_jobs_async()
            assert (job.session_id, job.user_id, job.app_name) == (SESSION, USER, APP)
        finally:
            await h.close()
            plugin.app.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", SERVICES)
def test_the_plugin_joins_a_plain_adk_tools_job_to_its_call(kind: str, tmp_path: Path) -> None:
    """A plain LongRunningFunctionTool answering with a jobId gets that job joined to its call."""

    async def main() -> None:
        app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}")
        outside = app.long_running(name="outside_export")(export_data)
        created = await outside.invoke_async({"export_type": "csv"})

        def start_outside_export(export_type: str) -> dict[str, str]:
            """Starts an export in another system."""
            return {"status": "pending", "jobId": created["jobId"]}

        h = Harness(kind, tmp_path, app=app, tools=[LongRunningFunctionTool(start_outside_export)])
        h.llm.rules = (
            longcall.Rule(
                r"export my data to (csv|json)",
                calls=[("start_outside_export", lambda m: {"export_type": m[1].lower()})],
            ),
        )
        try:
            await h.create_session()
            events = await h.say("Export my data to CSV")
            [call_id] = {i for e in events for i in e.long_running_tool_ids or ()}
            job = await app.get_job_async(created["jobId"])
            assert (job.app_name, job.user_id, job.session_id) == (APP, USER, SESSION)
            assert (job.call_id, job.invocation_id) == (call_id, events[0].invocation_id)
        finally:
            await h.close()

    asyncio.run(main())


# -- adk api_server -----------------------------------------------------------------------

AGENT_MODULE = '''
"""An offline agent for `adk api_server`: its tool reports who holds the session's lease."""
import os
import sqlite3
from contextlib import closing

import longcall
from google.adk.agents import LlmAgent
from longcall.adk import ScriptedLlm, long_running_tool

app = longcall.App()


def export_data(export_type: str) -> dict:
    """Exports the user's data as a file; the link arrives later."""
    path = os.environ["LONGCALL_DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as conn:
        held = conn.execute("SELECT kind FROM lc_session_leases WHERE holder <> ''")
        kinds = [k for (k,) in held]
    return {"message": f"leases held: {kinds}"}


root_agent = LlmAgent(
    name="exporter",
    model=ScriptedLlm(
        rules=[
            longcall.Rule(
                r"export my data to (csv|json)",
                calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
            )
        ]
    ),
    tools=[long_running_tool(app, export_data, key="export:{session_id}:{export_type}")],
)
'''


def http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_adk_api_server_with_extra_plugins_records_the_session_and_call(tmp_path: Path) -> None:
    """`adk api_server --extra_plugins longcall.adk.LongcallPlugin`: the job row gets the join."""
    from procs import free_port  # tests/procs.py; this file also runs alone, without it

    agents = tmp_path / "agents"
    (agents / "exports").mkdir(parents=True)
    (agents / "exports" / "__init__.py").write_text("from . import agent\n")
    (agents / "exports" / "agent.py").write_text(textwrap.dedent(AGENT_MODULE))
    db = tmp_path / "jobs.db"
    port = free_port()
    env = {**os.environ, "LONGCALL_DATABASE_URL": f"sqlite:///{db}"}
    log_path = tmp_path / "server.log"
    command = [
        sys.executable,
        "-m",
        "google.adk.cli",
        "api_server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--session_service_uri",
        "memory://",
        "--extra_plugins",
        "longcall.adk.LongcallPlugin",
        str(agents),
    ]
    base = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log_file:
        server = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert http("GET", f"{base}/list-apps") == ["exports"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    reason = f"adk api_server did not start: {log_path.read_text()[-2000:]}"
                    if IN_CI:
                        pytest.fail(reason)
                    pytest.skip(reason)
                time.sleep(0.1)
        http("POST", f"{base}/apps/exports/users/{USER}/sessions/{SESSION}", {})
        events = http(
            "POST",
            f"{base}/run",
            {
                "app_name": "exports",
                "user_id": USER,
                "session_id": SESSION,
                "new_message": {"role": "user", "parts": [{"text": "Export my data to CSV"}]},
            },
        )
        [call_id] = {i for e in events for i in e.get("longRunningToolIds") or ()}
        [pending] = [
            p["functionResponse"]["response"]
            for e in events
            for p in e["content"]["parts"]
            if "functionResponse" in p
        ]
        # The plugin, built by the CLI from LONGCALL_DATABASE_URL, held the turn's lease.
        assert pending == {
            "status": "pending",
            "jobId": job_id_for(f"export:{SESSION}:csv", USER),
            "message": "leases held: ['turn']",
        }
        with longcall.App(f"sqlite:///{db}") as app:
            [job] = app.list_jobs()
        assert (job.job_id, job.app_name, job.user_id, job.session_id) == (
            job_id_for(f"export:{SESSION}:csv", USER),
            "exports",
            USER,
            SESSION,
        )
        assert (job.call_id, job.invocation_id) == (call_id, events[0]["invocationId"])
        # Released as the run ended (the response does not wait for that commit).
        wait_until(lambda: leases(db) == [], "the turn's lease is released")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


if __name__ == "__main__":
    _phase, _kind, _directory = sys.argv[1:4]
    print(json.dumps(asyncio.run(child(_phase, _kind, Path(_directory)))))
