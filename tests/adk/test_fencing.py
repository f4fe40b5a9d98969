"""A stalled holder writes nothing once it lost its claim: fencing with google-adk.

ADK's session stores have no unique index per function call, so nothing in the store stops
a second closing response. Each scenario freezes a real worker process (it sends itself
SIGSTOP, as a VM stall or a long pause would) at one point of its delivery into a real ADK
``Runner`` over ``DatabaseSessionService``: before it asks the session whether the response is
there, after it asked, or while the model "thinks" with the response already stored. Its
lease (1 s) runs out; a second worker takes over and delivers; a user turn starts and is held
in the model; only then is the frozen worker continued. It must write nothing: the events
added to the ADK session after it woke are the user turn's alone, the call has exactly one
closing response, and the job row keeps the second worker's outcome.

The module is also the workers' program: ``python test_fencing.py URL ADK_DB LOG STALL_AT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
pytest.importorskip("sqlalchemy", reason="DatabaseSessionService needs sqlalchemy[asyncio]")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import DatabaseSessionService  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

from longcall.agents import AgentEvent, Message  # noqa: E402
from longcall.core.jobs import Delivery  # noqa: E402

APP, USER, SESSION = "exports", "u", "s"
LEASE = 1.0
STALL_POINTS = ["before_check", "after_check", "thinking"]
FINAL = {"succeeded", "failed", "expired", "cancelled"}
RULES = (
    longcall.Rule(
        r"export my data to (csv|json)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    ),
    longcall.Rule(r"slow question", reply="Here is the slow answer."),
)


def export_data(export_type: str) -> dict[str, str]:
    """Exports the user's data as a file; the link arrives later."""
    return {"message": f"Exporting {export_type} data."}


class Log:
    """One line per fact, appended with one write, so the test can read the worker's steps."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self.fd, ("\t".join(str(f) for f in fields) + "\n").encode())


def freeze(log: Log, where: str, app: longcall.App) -> None:
    """Stop this whole process, every thread of it, until the test sends SIGCONT.

    Never inside one of its SQLite write transactions: the deliverer's loop claims on another
    thread while a delivery runs, and a process frozen holding SQLite's one write lock stops
    every process's writes until it wakes (SQLite's single writer; no lease can help there),
    which is not what this test is about. PostgreSQL ends such a transaction by itself.
    """
    write_lock = getattr(app.store, "_write_lock", None)
    with write_lock if write_lock is not None else contextlib.nullcontext():
        log.write("stopped", where)
        os.kill(os.getpid(), signal.SIGSTOP)
        log.write("continued", where)


class ModelThatStalls(adk.ScriptedLlm):
    """The scripted model; with ``stall`` it freezes the process once, when it is asked to
    answer a closing function response (ADK has stored that response by then). With
    ``gate`` it holds requests whose last message is a user's text until the gate opens."""

    stall: Any = None
    gate: Any = None
    entered: Any = None
    requests: list[str] = Field(default_factory=list)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> Any:
        last = (llm_request.contents or [None])[-1]
        parts = list(last.parts or []) if last is not None else []
        answers_result = any(
            p.function_response and (p.function_response.response or {}).get("status") in FINAL
            for p in parts
        )
        if answers_result and self.stall is not None:
            stall, self.stall = self.stall, None
            stall()
        if self.gate is not None and any(p.text for p in parts):
            self.entered.set()
            await asyncio.wait_for(self.gate.wait(), 60)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def build(url: str, adk_db: Path, model: ModelThatStalls) -> tuple[longcall.App, Runner]:
    app = longcall.App(url)
    tool = adk.long_running_tool(app, export_data, key="export:{session_id}:{export_type}")
    runner = Runner(
        app=AdkApp(
            name=APP,
            root_agent=LlmAgent(name="exporter", model=model, tools=[tool]),
            plugins=[adk.LongcallPlugin(app)],
        ),
        session_service=DatabaseSessionService(f"sqlite+aiosqlite:///{adk_db}"),
    )
    return app, runner


class StallingRunner:
    """The ADK agent runner, freezing the process once around the deliverer's session check."""

    def __init__(
        self, inner: adk.AdkAgentRunner, log: Log, stall_at: str, app: longcall.App
    ) -> None:
        self.inner = inner
        self.app = app
        self.app_name = inner.app_name
        self.log = log
        self.stall_at = stall_at

    def _stall(self, where: str) -> None:
        if self.stall_at == where:
            self.stall_at = ""
            freeze(self.log, where, self.app)

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        self._stall("before_check")
        found = await self.inner.has_function_response(
            user_id=user_id, session_id=session_id, call_id=call_id
        )
        self._stall("after_check")
        return found

    def run(self, *, user_id: str, session_id: str, message: Message) -> AsyncIterator[AgentEvent]:
        return self.inner.run(user_id=user_id, session_id=session_id, message=message)


def wait_for_file(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


async def work(url: str, adk_db: Path, log_path: Path, stall_at: str) -> None:
    """A worker's delivery loop until ``<log>.stop`` exists."""
    log = Log(log_path)
    model = ModelThatStalls(rules=RULES)
    app, runner = build(url, adk_db, model)
    if stall_at == "thinking":
        model.stall = lambda: freeze(log, "thinking", app)
    app.delivery_listeners.append(lambda outcome, job: log.write("outcome", outcome, job.job_id))
    agent = StallingRunner(adk.AdkAgentRunner(runner), log, stall_at, app)
    deliverer = app.deliverer(agent, lease=LEASE, poll_interval=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(deliverer.run(stop))
    log.write("ready")
    await asyncio.to_thread(wait_for_file, Path(f"{log_path}.stop"))
    stop.set()
    await task
    log.write("stats", json.dumps(dict(deliverer.stats)))
    await runner.close()
    app.close()


# -- the test's side ----------------------------------------------------------------------


class Worker:
    def __init__(self, url: str, adk_db: Path, log: Path, stall_at: str) -> None:
        self.log = log
        with open(f"{log}.err", "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, url, str(adk_db), str(log), stall_at],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def lines(self, kind: str | None = None) -> list[list[str]]:
        if not self.log.exists():
            return []
        rows = [ln.split("\t") for ln in self.log.read_text().splitlines() if ln]
        return [r for r in rows if kind is None or r[0] == kind]

    async def until(self, kind: str, seconds: float = 60.0) -> list[str]:
        give_up = time.monotonic() + seconds
        while not (found := self.lines(kind)):
            assert self.proc.poll() is None, f"worker exited: {self.errors()}"
            assert time.monotonic() < give_up, f"no {kind!r} from the worker: {self.errors()}"
            await asyncio.sleep(0.02)
        return found[-1]

    def errors(self) -> str:
        return Path(f"{self.log}.err").read_text()[-3000:]

    def stop(self) -> None:
        Path(f"{self.log}.stop").touch()

    def reap(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.stop()
            try:
                return self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode


def frozen(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def closing_responses(events: list[Event], call_id: str) -> int:
    return sum(
        1
        for e in events
        for r in e.get_function_responses()
        if r.id == call_id and (r.response or {}).get("status") in FINAL
    )


async def eventually(check: Any, what: str, seconds: float = 60.0) -> None:
    give_up = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("stall_at", STALL_POINTS)
def test_a_stalled_holder_writes_nothing_after_losing_its_claim(
    db_url: str, tmp_path: Path, stall_at: str
) -> None:
    adk_db = tmp_path / "adk-sessions.db"
    # ADK's SQLite file in WAL mode (it stays so): in its default rollback journal, a reader
    # frozen with its read open would keep every other process from committing to it.
    with contextlib.closing(sqlite3.connect(adk_db)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    model = ModelThatStalls(rules=RULES)
    app, runner = build(db_url, adk_db, model)
    sessions = runner.session_service
    stalled = Worker(db_url, adk_db, tmp_path / "stalled.log", stall_at)
    taker: Worker | None = None

    async def events() -> list[Event]:
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        return list(session.events)

    async def say(text: str) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message=message)
        ]

    async def scenario() -> dict[str, Any]:
        nonlocal taker
        await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        await say("Export my data to CSV")
        [job] = await app.list_jobs_async()
        assert job.call_id is not None
        await stalled.until("ready")
        assert (await app.complete_async(job.job_id, {"url": "https://example.com/x.csv"})).changed
        await stalled.until("stopped")

        async def is_frozen() -> bool:
            return frozen(stalled.proc.pid)

        await eventually(is_frozen, "the worker to stop itself")

        taker = Worker(db_url, adk_db, tmp_path / "taker.log", "none")

        async def delivered() -> bool:
            return (await app.get_job_async(job.job_id)).delivery is Delivery.DELIVERED

        await eventually(delivered, "the second worker to deliver the result")
        after_takeover = await app.get_job_async(job.job_id)

        # A user turn holds the session (its model waits at the gate) when the stalled
        # worker wakes: whatever that worker wrote now would interleave with the turn.
        model.gate, model.entered = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(say("slow question"))
        await asyncio.wait_for(model.entered.wait(), 60)
        before_waking = {e.id for e in await events()}
        os.kill(stalled.proc.pid, signal.SIGCONT)
        await stalled.until("continued")
        outcome = await stalled.until("outcome")
        model.gate.set()
        turn_events = await asyncio.wait_for(turn, 60)
        everything = await events()
        return {
            "job": job,
            "after_takeover": after_takeover,
            "final": await app.get_job_async(job.job_id),
            "outcome": outcome[1],
            "added": [e for e in everything if e.id not in before_waking],
            "turn_invocation": turn_events[0].invocation_id,
            "closing": closing_responses(everything, job.call_id),
        }

    async def closed_after(body: Any) -> dict[str, Any]:
        try:
            return dict(await body)
        finally:
            await runner.close()
            closing = getattr(sessions, "close", None)
            if closing is not None:
                result = closing()
                if inspect.isawaitable(result):
                    await result

    try:
        found = asyncio.run(closed_after(scenario()))
    finally:
        codes = [stalled.reap(), taker.reap() if taker is not None else 0]
        app.close()
    assert codes == [0, 0], stalled.errors()
    assert found["closing"] == 1
    # Nothing from the woken worker: every event added since is the user turn's.
    added = found["added"]
    assert added and {e.invocation_id for e in added} == {found["turn_invocation"]}, [
        (e.author, e.invocation_id) for e in added
    ]
    # Its outcome changed nothing in the job table either.
    assert found["final"] == found["after_takeover"]
    # Its heartbeat, due at once on waking, finds the lease gone and cuts the delivery
    # short; or the delivery gets there first: before the check it finds the response in
    # the session and cannot mark it (its claim is gone); after the check, or with the
    # response stored, its fence stops the next append.
    stats = json.loads(stalled.lines("stats")[-1][1])
    if found["outcome"] == "already_in_session":
        assert stall_at == "before_check"
        assert stats.get("claim_lost") == 1
    else:
        assert found["outcome"] == "fence_lost", found["outcome"]
    print(f"\n{stall_at}: the woken worker's outcome was {found['outcome']}; stats {stats}")


if __name__ == "__main__":
    asyncio.run(work(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
