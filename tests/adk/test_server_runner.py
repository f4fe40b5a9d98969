"""Resumes delivered through `adk api_server`'s own `/run` (``AdkServerRunner``), as real
processes: ADK's server with longcall's plugin in a child process, the longcall worker in this
one. The plugin in the server recognises the deliverer's message and runs it under the
deliverer's lease at once, while a user turn on the session waits for it.

The tests at the end check the plugin's side in one process, and the runner's refusals.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")
import httpx
from google.adk.agents import LlmAgent
from google.adk.apps import App as AdkApp
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

import longcall
from adk.servers import APP_NAME, BIN, USER, model_texts, process, wait_for, write_agents
from longcall import CallIds, Delivery, JobState
from longcall.adk import AdkServerRunner, LongcallPlugin, ScriptedLlm, long_running_tool
from longcall.adk.plugin import answers_of
from longcall.agents import Message
from longcall.errors import AgentError
from longcall.store import NewJob
from longcall.worker import Worker
from procs import free_port

# The report agent, whose model takes RESUME_SECONDS to answer a finished report in a session
# named slow-*: long enough for a user turn to arrive while the resume runs.
AGENT_PY = '''
"""A report agent: a scripted model, one longcall long-running tool, a slow resumed turn."""
import asyncio
import os

import longcall
from google.adk.agents import LlmAgent
from longcall import adk

app = longcall.App(os.environ["LONGCALL_DATABASE_URL"])


def start_report(region: str) -> dict:
    """Starts a sales report build for a region code."""
    return {"message": "Report build started."}


async def slow_resumes(callback_context, llm_request):
    last = llm_request.contents[-1] if llm_request.contents else None
    finished = last is not None and any(
        p.function_response and (p.function_response.response or {}).get("status") == "succeeded"
        for p in last.parts or ()
    )
    if finished and callback_context.session.id.startswith("slow"):
        await asyncio.sleep(float(os.environ["RESUME_SECONDS"]))
    return None


report = adk.long_running_tool(app, start_report, key="report:{region}")
root_agent = LlmAgent(
    name="reporter",
    model=adk.ScriptedLlm(
        rules=[
            longcall.Rule(
                r"report for (\\w+)", calls=[("start_report", lambda m: {"region": m[1]})]
            ),
            longcall.Rule(r"hello", reply="Hello again."),
        ]
    ),
    tools=[report],
    before_model_callback=slow_resumes,
)
'''
RESUME_SECONDS = 2.0


class AdkServer:
    """`adk api_server` with longcall's plugin over a session file, in a child process."""

    def __init__(self, tmp_path: Path, db_url: str) -> None:
        self.agents = write_agents(tmp_path, agent_py=AGENT_PY)
        self.sessions_uri = f"sqlite:///{tmp_path / 'sessions.db'}"
        self.log = tmp_path / "adk.log"
        self.env = {
            **os.environ,
            "LONGCALL_DATABASE_URL": db_url,
            "RESUME_SECONDS": str(RESUME_SECONDS),
        }
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client()  # one per run of the server, opened by running()

    @contextmanager
    def running(self) -> Iterator[None]:
        args = [str(BIN / "adk"), "api_server", "--port", str(self.port), str(self.agents)]
        args += ["--session_service_uri", self.sessions_uri]
        args += ["--extra_plugins", "longcall.adk.LongcallPlugin"]
        with (
            process(args, self.env, self.log),
            httpx.Client(base_url=self.base, timeout=60) as self.http,
        ):
            wait_for("adk api_server", lambda: self.http.get("/list-apps").status_code == 200)
            yield

    def turn(self, session_id: str, text: str) -> list[dict[str, Any]]:
        """A user's turn through /run, on a session made for it if it is new."""
        path = f"/apps/{APP_NAME}/users/{USER}/sessions/{session_id}"
        if self.http.get(path).status_code == 404:
            made = self.http.post(path, json={})
            assert made.status_code == 200, made.text
        ran = self.http.post(
            "/run",
            json={
                "app_name": APP_NAME,
                "user_id": USER,
                "session_id": session_id,
                "new_message": {"role": "user", "parts": [{"text": text}]},
            },
        )
        assert ran.status_code == 200, ran.text
        return list(ran.json())

    def session(self, session_id: str) -> dict[str, Any]:
        got = self.http.get(f"/apps/{APP_NAME}/users/{USER}/sessions/{session_id}")
        assert got.status_code == 200, got.text
        return dict(got.json())

    def texts(self, session_id: str) -> list[str]:
        return model_texts(self.session(session_id))


@contextmanager
def worker_thread(app: longcall.App, runner: AdkServerRunner, **options: Any) -> Iterator[Worker]:
    """A longcall worker delivering through ``runner``, on its own loop in a thread."""
    worker = app.worker(runner, poll_interval="0.1s", drain_timeout="3s", **options)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(worker.run(handle_signals=False),)
    )
    thread.start()
    try:
        wait_for("the worker to start", lambda: worker.stop_event is not None)
        yield worker
    finally:
        loop.call_soon_threadsafe(worker.stop)
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"
        loop.close()


def answer(rows: int) -> str:
    return f"start_report has finished: rows {rows}."


def job_of(region: str) -> str:
    return longcall.job_id_for(f"report:{region}", USER)


def user_texts(session: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for event in session["events"]
        if event.get("author") == "user"
        for part in (event.get("content") or {}).get("parts") or []
        if part.get("text")
    ]


def test_resumes_through_run_join_the_deliverers_lease_and_a_user_turn_waits_for_them(
    db_url: str, tmp_path: Path
) -> None:
    """Completions are resumed through the server's /run within moments (not after the
    plugin's 300 s wait), each answer once; a user turn sent while a resume runs waits for
    it and comes after it in the session, never interleaved."""
    server = AdkServer(tmp_path, db_url)
    with server.running(), longcall.App(db_url) as app:
        regions = ["EMEA", "APAC", "LATAM", "NA", "ANZ"]
        for region in regions:
            server.turn(f"fast-{region}", f"Build the report for {region}.")
        server.turn("slow-1", "Build the report for DACH.")
        runner = AdkServerRunner(server.base, app_name=APP_NAME)
        with worker_thread(app, runner) as worker:
            latencies = []
            for rows, region in enumerate(regions, start=1):
                started = time.monotonic()
                app.complete(job_of(region), {"rows": rows})
                wait_for(
                    f"the answer in fast-{region}",
                    lambda r=rows, g=region: answer(r) in server.texts(f"fast-{g}"),
                )
                latencies.append(time.monotonic() - started)
            recorded = [app.get_job(job_of(r)) for r in regions]
            print(
                "\ncompletion to resumed answer read back through /run (s):",
                [round(x, 3) for x in latencies],
                "\ncompletion to delivery recorded (s):",
                [round((j.delivered_at or 0) - (j.finished_at or 0), 3) for j in recorded],
            )
            assert max(latencies) < 30
            assert statistics.median(latencies) < 5

            # A user turn while the slow session's resume runs (its model takes 2 s).
            app.complete(job_of("DACH"), {"rows": 9})
            wait_for("the resume of slow-1", lambda: app.get_job(job_of("DACH")).claim_holder)
            sent = time.monotonic()
            replied = server.turn("slow-1", "Say hello.")
            waited = time.monotonic() - sent
            assert any(
                p.get("text") == "Hello again."
                for e in replied
                for p in (e.get("content") or {}).get("parts") or []
            )
            wait_for("the slow answer recorded", lambda: app.get_job(job_of("DACH")).delivered_at)
            stats = dict(worker.deliverer.stats) if worker.deliverer else {}
        print(f"user turn during the resume waited {waited:.2f}s")
        assert waited > RESUME_SECONDS / 4  # it waited for the resume to end
        session = server.session("slow-1")
        texts = model_texts(session)
        assert texts.count(answer(9)) == 1
        assert texts.index(answer(9)) < texts.index("Hello again.")
        # The user's words come after the resumed answer: the two runs did not interleave.
        events = session["events"]
        said_hello = next(
            i for i, e in enumerate(events) if "Say hello." in user_texts({"events": [e]})
        )
        answered = next(
            i for i, e in enumerate(events) if answer(9) in model_texts({"events": [e]})
        )
        assert answered < said_hello
        for region, rows in zip(regions, range(1, 6), strict=True):
            assert server.texts(f"fast-{region}").count(answer(rows)) == 1
        assert stats.get("delivered") == 6, stats
    busy = [line for line in server.log.read_text().splitlines() if "stayed busy" in line]
    assert not busy, busy


def test_a_response_to_a_call_the_session_lacks_is_orphaned_with_the_reason(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A job whose call the ADK session does not hold, or whose session the server does not
    have, is orphaned (not retried) and says which call is missing."""
    server = AdkServer(tmp_path, sqlite_url)
    with server.running(), longcall.App(sqlite_url) as app:
        server.turn("s1", "Build the report for EMEA.")
        before = server.session("s1")["events"]
        for job_id, session_id in (("lost-call", "s1"), ("lost-session", "no-such-session")):
            ids = CallIds(APP_NAME, USER, session_id, f"adk-{job_id}", "e-1")
            app.store.create_job(
                NewJob(job_id, "start_report", {}, ids, None), holder="t", dispatch_lease=60
            )
            app.store.finish_dispatch(job_id, None)
            app.complete(job_id, {"rows": 1})
        with worker_thread(app, AdkServerRunner(server.base, app_name=APP_NAME)):
            for job_id in ("lost-call", "lost-session"):
                wait_for(
                    f"{job_id} orphaned",
                    lambda j=job_id: app.get_job(j).delivery is Delivery.ORPHANED,
                )
        lost = app.get_job("lost-call")
        assert "has no function call 'adk-lost-call'" in (lost.last_error or ""), lost
        assert lost.attempts == 1
        assert server.session("s1")["events"] == before  # nothing was posted into it


def test_a_delivery_while_the_server_is_down_is_retried_until_it_is_back(
    sqlite_url: str, tmp_path: Path
) -> None:
    """With the ADK server down, the delivery fails with a clear error and is retried; once
    the server is back (same port, same session file) the answer arrives, once."""
    server = AdkServer(tmp_path, sqlite_url)
    with server.running():
        server.turn("s1", "Build the report for EMEA.")
    with longcall.App(sqlite_url) as app:
        runner = AdkServerRunner(server.base, app_name=APP_NAME)
        with worker_thread(app, runner, retry_base="0.2s", retry_cap="1s") as worker:
            app.complete(job_of("EMEA"), {"rows": 3})
            failed = wait_for(
                "a failed attempt",
                lambda: (job := app.get_job(job_of("EMEA"))).last_error and job,
            )
            assert "did not answer" in failed.last_error and "ConnectError" in failed.last_error
            assert failed.delivery is Delivery.READY  # not lost: retried
            with server.running():
                wait_for("the answer", lambda: answer(3) in server.texts("s1"))
                wait_for("the delivery recorded", lambda: app.get_job(job_of("EMEA")).delivered_at)
                assert server.texts("s1").count(answer(3)) == 1
            assert worker.deliverer is not None
            assert worker.deliverer.stats["delivery_retried"] >= 1
            assert worker.deliverer.stats["delivered"] == 1


def test_http_failures_name_the_status_and_the_body(sqlite_url: str, tmp_path: Path) -> None:
    """A request the server refuses is an AgentError quoting its status and body; a runner for
    an app the server lacks says so instead of taking every session for missing."""
    server = AdkServer(tmp_path, sqlite_url)
    with server.running():
        runner = AdkServerRunner(server.base, app_name=APP_NAME)

        async def post_to_no_session() -> None:
            async for _ in runner.run(
                user_id=USER, session_id="nowhere", message=Message(text="Hi.")
            ):
                pass

        with pytest.raises(AgentError, match=r"POST /run with 404: .*Session not found"):
            asyncio.run(post_to_no_session())
        wrong = AdkServerRunner(server.base, app_name="nosuch")
        with pytest.raises(AgentError, match=r"serves no app 'nosuch' \(it serves reports\)"):
            asyncio.run(wrong.has_function_response(user_id=USER, session_id="s", call_id="c"))


# -- the plugin's side, in one process -----------------------------------------------------


def test_the_plugin_joins_a_live_deliverys_own_answers_and_keeps_others_waiting(
    tmp_path: Path,
) -> None:
    """While a delivery holds the session, a run answering only its claimed calls goes ahead
    at once (a deliverer elsewhere posting to this process's ADK server); a user's text, or
    an answer to an open call the delivery does not hold, waits for the lease as before."""
    app = longcall.App(f"sqlite:///{tmp_path / 'lc.db'}")

    def start_report(region: str) -> dict[str, str]:
        """Starts a sales report build for a region code."""
        return {"message": "Report build started."}

    report = long_running_tool(app, start_report, key="report:{region}")
    model = ScriptedLlm(
        rules=[
            longcall.Rule(r"report for (\w+)", calls=[("start_report", lambda m: {"region": m[1]})])
        ]
    )
    agent = LlmAgent(name="reporter", model=model, tools=[report])
    plugin = LongcallPlugin(app, wait_limit=1.0)
    runner = Runner(
        app=AdkApp(name=APP_NAME, root_agent=agent, plugins=[plugin]),
        session_service=InMemorySessionService(),
    )

    async def run(text: str | None = None, response: types.FunctionResponse | None = None) -> float:
        part = types.Part(text=text) if text else types.Part(function_response=response)
        started = time.monotonic()
        async for _ in runner.run_async(
            user_id=USER, session_id="s1", new_message=types.Content(role="user", parts=[part])
        ):
            pass
        return time.monotonic() - started

    async def scenario() -> None:
        await runner.session_service.create_session(
            app_name=APP_NAME, user_id=USER, session_id="s1"
        )
        await run("Build the report for EMEA.")
        await run("Build the report for APAC.")
        job = await app.get_job_async(job_of("EMEA"))
        still_open = await app.get_job_async(job_of("APAC"))
        assert job.call_id is not None and still_open.call_id is not None
        await app.complete_async(job.job_id, {"rows": 3})
        assert app.store.claim("deliverer", limit=10, lease=60, app_name=APP_NAME)
        own = types.FunctionResponse(
            id=job.call_id, name="start_report", response={"status": "succeeded"}
        )
        assert await run(response=own) < 0.9  # joined: no wait (a wait lasts 1 s or more)
        forged = types.FunctionResponse(
            id=still_open.call_id, name="start_report", response={"status": "succeeded"}
        )
        assert await run(response=forged) >= 1.0  # waited for the lease, then went on
        assert await run("Hello?") >= 1.0

    try:
        asyncio.run(scenario())
    finally:
        asyncio.run(runner.close())
        app.close()


def test_answers_of_reads_only_messages_of_function_responses_with_ids() -> None:
    """The call ids of a message of function responses; nothing for text, a mix, or a
    response without its call id."""

    def response(call_id: str | None, name: str = "t") -> types.Part:
        return types.Part(function_response=types.FunctionResponse(id=call_id, name=name))

    def content(*parts: types.Part) -> types.Content:
        return types.Content(role="user", parts=list(parts))

    assert answers_of(content(response("a"), response("b", "u"))) == {"a", "b"}
    assert answers_of(content(types.Part(text="hi"))) == set()
    assert answers_of(content(response("a"), types.Part(text="hi"))) == set()
    assert answers_of(content(response(None))) == set()
    assert answers_of(content()) == set()


@pytest.mark.parametrize(
    ("base_url", "app_name", "says"),
    [
        ("127.0.0.1:8000", "reports", "http:// or https:// address"),
        ("http://127.0.0.1:8000", "", "app_name must name"),
    ],
)
def test_the_runner_refuses_an_address_or_app_it_cannot_use(
    base_url: str, app_name: str, says: str
) -> None:
    """A base URL without its scheme, or no app name, is refused when the runner is built."""
    with pytest.raises(ValueError, match=says):
        AdkServerRunner(base_url, app_name=app_name)


def test_the_session_is_read_over_http_for_closing_responses_and_the_transcript(
    sqlite_url: str, tmp_path: Path
) -> None:
    """has_function_response finds a closing response only once it is in the session (so a
    deliverer that lost its bookkeeping marks the job instead of posting again), and the
    transcript shows the session's conversation."""
    server = AdkServer(tmp_path, sqlite_url)
    with server.running(), longcall.App(sqlite_url) as app:
        server.turn("s1", "Build the report for EMEA.")
        job = app.get_job(job_of("EMEA"))
        assert job.call_id is not None and job.state is JobState.STARTED
        runner = AdkServerRunner(server.base, app_name=APP_NAME)

        async def ask() -> bool:
            return await runner.has_function_response(
                user_id=USER, session_id="s1", call_id=job.call_id or ""
            )

        assert asyncio.run(ask()) is False  # only the pending answer is there
        app.complete(job.job_id, {"rows": 3})
        with worker_thread(app, runner):
            wait_for("the delivery", lambda: app.get_job(job.job_id).delivered_at)
        assert asyncio.run(ask()) is True
        events = asyncio.run(runner.transcript(user_id=USER, session_id="s1"))
        texts = [e.text for e in events if e.text]
        assert texts[0] == "Build the report for EMEA." and texts[-1] == answer(3), texts
        assert texts.count(answer(3)) == 1
