"""``longcall demo``: the worked example through the service, in real time.

A real server on a free local port (the API, the webhook endpoint and the worker loops, in this
process); a user's session with the agent; the report handed to a simulated batch system that
later posts a signed completion over HTTP and, like any sender retrying, posts the same
delivery again; the worker resuming the session with the result; a second report that never
finishes, whose deadline answers for it; a late result that changes nothing. Minutes are played
as seconds: the 19-minute build takes one, the 45-minute deadline three. Every step is checked,
and the exit status is 0 only when all of them passed.

Needs the server extra (``pip install 'longcall[server]'``): importing this module without it
raises the ImportError that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rich.console import Console

from longcall import JobHandle
from longcall.agents import AgentEvent, FunctionResponse
from longcall.app import App
from longcall.cli._demo import Timeline
from longcall.cli._demo_cast import (
    APAC,
    EMEA,
    SESSION,
    Conversation,
    ReportTool,
    ScriptedConversation,
)
from longcall.core.jobs import Delivery, Job, JobState
from longcall.errors import JobNotFound
from longcall.server import runner
from longcall.server.app import Settings
from longcall.webhooks import new_secret, sign

SOURCE = "batch"
BUILD_SECONDS = 1.0  # the 19-minute build
DEADLINE_SECONDS = 3.0  # the 45-minute deadline
WAIT_SECONDS = 10.0  # the longest any one step may take before its check fails
RESULT = {"url": "https://reports.example.com/2026-Q3-EMEA.csv", "rowCount": 48213}
TOOL = "start_sales_report"


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP response: status and parsed JSON body (or ``{"text": ...}``)."""

    status: int
    body: dict[str, Any]


# 127.0.0.1 only, and never through a proxy the environment may name.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _request(
    method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=10) as response:
            return Answer(response.status, _parse(response.read()))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, _parse(exc.read()))


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"text": raw.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"value": value}


async def http(
    method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    """One request, off the event loop (the server answering it runs on the loop)."""
    return await asyncio.to_thread(_request, method, url, body=body, headers=headers)


@dataclass
class BatchSystem:
    """The report cluster, simulated: takes jobs from the tool, later posts signed webhooks."""

    base: str
    secret: str
    submitted: list[str] = field(default_factory=list)

    def submit(self, job: JobHandle) -> None:
        """What the tool's body calls (in a worker thread): the job id is the idempotency key."""
        self.submitted.append(job.id)

    async def post(self, payload: dict[str, Any], *, webhook_id: str) -> Answer:
        """Sign ``payload`` as a Standard Webhooks delivery and POST it to the service."""
        body = json.dumps(payload).encode()
        headers = sign(body, self.secret, webhook_id=webhook_id)
        headers["content-type"] = "application/json"
        return await http("POST", f"{self.base}/v1/hooks/{SOURCE}", body=body, headers=headers)


def seconds_since(start: float) -> Callable[[], str]:
    """A stamp showing the seconds since ``start`` (``time.monotonic``), as wide as HH:MM:SS."""
    return lambda: f"{time.monotonic() - start:7.2f}s"


async def wait_for(condition: Callable[[], Awaitable[bool]], seconds: float = WAIT_SECONDS) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while True:
        if await condition():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)


def finals(history: list[AgentEvent], job_id: str) -> list[tuple[int, FunctionResponse]]:
    """The closing responses to ``job_id``'s call in a session, with their positions."""
    return [
        (index, response)
        for index, event in enumerate(history)
        if event.author == "user"
        for response in event.function_responses
        if response.response.get("jobId") == job_id and response.response.get("status") != "pending"
    ]


def answered_after(history: list[AgentEvent], index: int) -> bool:
    """Whether the agent said something after the event at ``index``."""
    return any(e.author != "user" and e.text for e in history[index + 1 :])


@dataclass
class Service:
    """What the demo talks to: the App, the conversation, the live server's URL and keys."""

    app: App
    chat: Conversation
    line: Timeline
    base: str
    token: str
    batch: BatchSystem


async def play(service: Service) -> None:
    """The worked example, step by step, each step checked on the timeline."""
    app, chat, line, base, batch = (
        service.app,
        service.chat,
        service.line,
        service.base,
        service.batch,
    )

    async def ask(text: str) -> None:
        line.say("user", text, "bold")
        line.events(await chat.ask(text))

    async def job(job_id: str) -> Job:
        return await app.get_job_async(job_id)

    async def api_job(job_id: str) -> Answer:
        auth = {"authorization": f"Bearer {service.token}"}
        return await http("GET", f"{base}/v1/jobs/{quote(job_id, safe='')}", headers=auth)

    health = await http("GET", f"{base}/healthz")
    ready = await http("GET", f"{base}/readyz")
    line.say("service", f"GET /healthz {health.status}, GET /readyz {ready.status}", "blue")
    line.check(
        health.status == 200 and ready.status == 200,
        f"the service answers /healthz and /readyz on {base}",
    )

    # -- the report that finishes ----------------------------------------------------------
    await ask("Please build the sales report for 2026-Q3 EMEA.")
    emea = await job(EMEA)
    line.check(
        emea.state is JobState.STARTED and emea.attached,
        f"job {EMEA} recorded with its session and call id",
    )
    line.check(
        emea.deadline_at is not None
        and abs(emea.deadline_at - emea.created_at - DEADLINE_SECONDS) < 0.5,
        f"its deadline is {DEADLINE_SECONDS:g} s after it started (the 45 minutes, scaled)",
    )
    line.check(batch.submitted == [EMEA], "the batch system got the work once, keyed by job id")
    line.say("batch system", f"accepted {EMEA}; building (about {BUILD_SECONDS:g} s)", "yellow")
    delivery_id = f"msg_{uuid.uuid4().hex[:16]}"
    completion = {"jobId": EMEA, "type": "complete", "result": RESULT}

    async def build() -> Answer:
        await asyncio.sleep(BUILD_SECONDS)
        line.say(
            "batch system",
            f"POST /v1/hooks/{SOURCE}: {EMEA} complete, signed (webhook-id {delivery_id})",
            "yellow",
        )
        return await batch.post(completion, webhook_id=delivery_id)

    building = asyncio.create_task(build())
    shown = await api_job(EMEA)
    line.say("operator", f"GET /v1/jobs/{EMEA} with the admin token: {shown.status}", "blue")
    line.check(
        shown.status == 200 and shown.body.get("state") == "started",
        "the API shows the job running to the admin token",
    )
    await ask("How many vacation days do I have left?")
    emea = await job(EMEA)
    line.check(
        emea.state is JobState.STARTED and emea.delivery is Delivery.NONE,
        "nothing to resume while the report runs",
    )

    first = await building
    line.say("service", f"{first.status} {first.body.get('outcome')}", "blue")
    line.check(
        first.status == 200 and first.body.get("outcome") == "applied",
        "the signed completion was answered 200 applied",
    )

    async def delivered(job_id: str) -> bool:
        return (await job(job_id)).delivery is Delivery.DELIVERED

    resumed = await wait_for(lambda: delivered(EMEA))
    history = await chat.history()
    closing = finals(history, EMEA)
    line.check(
        resumed and len(closing) == 1 and closing[0][1].response.get("result") == RESULT,
        "the worker resumed the session once, with the URL and row count",
    )
    line.check(
        bool(closing) and answered_after(history, closing[0][0]),
        "the agent answered the user with the result",
    )

    line.say(
        "batch system",
        f"POST /v1/hooks/{SOURCE} again: the same delivery (webhook-id {delivery_id}), "
        "as a sender retries when it missed the answer",
        "yellow",
    )
    again = await batch.post(completion, webhook_id=delivery_id)
    line.say("service", f"{again.status} {again.body.get('outcome')}", "blue")
    line.check(
        again.status == 200 and again.body.get("outcome") == "duplicate",
        "the repeated delivery was answered 200 duplicate",
    )
    events = await app.job_events_async(EMEA)
    inbox = await app.in_thread(app.inbox, EMEA)
    emea = await job(EMEA)
    line.check(
        [e.kind for e in events].count("succeeded") == 1
        and len(inbox) == 1
        and emea.result == RESULT,
        "the job changed once: one completion in its log, one delivery recorded",
    )
    await asyncio.sleep(0.5)  # room for a second resume, were there one
    line.check(
        len(finals(await chat.history(), EMEA)) == 1,
        "and nothing reached the session twice",
    )

    # -- the report that never finishes ----------------------------------------------------
    await ask("Also the sales report for 2026-Q3 APAC, please.")
    apac = await job(APAC)
    line.check(
        apac.attached and batch.submitted == [EMEA, APAC],
        f"job {APAC} recorded and handed to the batch system",
    )
    line.say("batch system", f"accepted {APAC}; this build hangs and never reports", "yellow")

    async def expired_and_told() -> bool:
        current = await job(APAC)
        return current.state is JobState.EXPIRED and current.delivery is Delivery.DELIVERED

    told = await wait_for(expired_and_told, DEADLINE_SECONDS + WAIT_SECONDS)
    apac = await job(APAC)
    line.check(
        apac.state is JobState.EXPIRED
        and apac.finished_at is not None
        and apac.deadline_at is not None
        and apac.finished_at >= apac.deadline_at,
        f"the APAC report expired at its deadline, {DEADLINE_SECONDS:g} s after it started",
    )
    closing = finals(await chat.history(), APAC)
    line.check(
        told and len(closing) == 1 and closing[0][1].response.get("status") == "expired",
        "the agent was told, once",
    )

    late_id = f"msg_{uuid.uuid4().hex[:16]}"
    line.say(
        "batch system",
        f"POST /v1/hooks/{SOURCE}: {APAC} complete after all (webhook-id {late_id})",
        "yellow",
    )
    late = await batch.post(
        {"jobId": APAC, "type": "complete", "result": {"url": "late"}}, webhook_id=late_id
    )
    line.say("service", f"{late.status} {late.body.get('outcome')}", "blue")
    apac = await job(APAC)
    events = await app.job_events_async(APAC)
    line.check(
        late.status == 200
        and late.body.get("outcome") == "unchanged"
        and apac.state is JobState.EXPIRED
        and events[-1].kind == "ignored",
        "the late result was answered 200 unchanged, recorded, and changed nothing",
    )


def narrate(line: Timeline, session: str) -> Callable[[Job, AgentEvent], None]:
    """The deliverer's ``on_event``: says why the worker resumes a session, then what happened."""
    announced: set[str] = set()

    def on_event(job: Job, event: AgentEvent) -> None:
        if job.job_id not in announced and job.terminal:
            announced.add(job.job_id)
            if job.state is JobState.EXPIRED:
                line.say("sweeper", f"{job.job_id} passed its deadline: expired", "yellow")
            line.say("worker", f"resumes {session} with {job.job_id} ({job.state.value})", "blue")
        line.events([event])

    return on_event


async def serve_and_play(
    service: Service, console: Console, *, sock: socket.socket, secret: str, keep_serving: bool
) -> int:
    """Start the server and the worker loops, play the example, print the summary, then stop
    (or keep serving until a signal); return the exit status."""
    app, chat, line = service.app, service.chat, service.line
    server = runner.build(app, agent=chat.runner, settings=Settings())
    worker = app.worker(
        chat.runner,
        poll_interval="200ms",
        sweep_interval="200ms",
        dispatch_interval="500ms",
        on_event=narrate(line, SESSION),
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="server")
    working = asyncio.create_task(worker.run(handle_signals=False), name="worker")

    async def started() -> bool:
        return bool(server.started) or serving.done()

    try:
        if not await wait_for(started) or serving.done():
            line.check(False, "the server started")
            return line.summary()
        demo = asyncio.create_task(play(service), name="demo")
        await asyncio.wait({demo, serving}, return_when=asyncio.FIRST_COMPLETED)
        if not demo.done():  # a signal stopped the server first
            demo.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await demo
            line.check(False, "the demo ran to its end (it was interrupted)")
            return line.summary()
        if demo.exception() is not None:
            error = demo.exception()
            line.check(False, f"the demo ran to its end ({type(error).__name__}: {error})")
        status = line.summary()
        if keep_serving:
            _print_access(console, service.base, service.token, secret, app.url)
            await serving  # until SIGTERM or Ctrl-C
            console.print("stopped", highlight=False)
        return status
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await serving
        worker.stop()
        await working


def _print_access(console: Console, base: str, token: str, secret: str, url: str) -> None:
    rows = [
        ("dashboard", f"{base}/login (paste the token below into its form)"),
        ("API", f"curl -H 'Authorization: Bearer {token}' {base}/v1/jobs"),
        ("token", f"{token} (admin)"),
        ("webhooks", f"POST {base}/v1/hooks/{SOURCE}, signed with {secret}"),
        ("database", url),
    ]
    console.print(f"\n[bold]serving on {base}[/bold] until Ctrl-C or SIGTERM", highlight=False)
    for name, value in rows:
        console.print(f"  {name:<10} {value}", soft_wrap=True, highlight=False)
    sys.stdout.flush()


@contextlib.contextmanager
def _signals_after_drain() -> Iterator[None]:
    """Let SIGINT and SIGTERM end the demo through uvicorn, and nothing more.

    uvicorn catches both while it serves and raises the signal again after draining, under
    the handler it found: these do nothing, so the demo goes on to stop the worker, print
    its summary and exit with its status.
    """
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_service_demo(
    database: str | None = None,
    console: Console | None = None,
    *,
    adk: bool = False,
    serve: bool = False,
    port: int = 0,
) -> int:
    """Play the demo through a live server; return the exit status (0: every check passed).

    ``database`` defaults to a SQLite file in a temporary directory; it must not hold the
    demo's jobs already. With ``serve`` the server, dashboard and worker keep running after
    the demo until SIGINT or SIGTERM. With ``adk`` the agent is google-adk's Runner (see
    :mod:`longcall.cli._demo_adk`). 2 is the status for a database or port the demo cannot use.
    """
    console = console or Console()
    conversation: Callable[[App, ReportTool], Conversation] = ScriptedConversation
    agent_name = "the scripted agent"
    if adk:
        from longcall.cli._demo_adk import AdkConversation, model_name

        conversation = AdkConversation
        agent_name = f"google-adk with {model_name()}"
    with tempfile.TemporaryDirectory(prefix="longcall-demo-") as tmp:
        url = database or f"sqlite:///{Path(tmp) / 'demo.db'}"
        with App(url) as app, socket.socket() as sock:
            problem = _unusable(app, sock, port)
            if problem:
                console.print(f"[red]error:[/red] {problem}", highlight=False)
                return 2
            base = f"http://127.0.0.1:{sock.getsockname()[1]}"
            secret = app.access.add_webhook_secret(SOURCE, new_secret()).secret
            _, token = app.access.create_token(user_id=None, admin=True)
            batch = BatchSystem(base, secret)
            chat = conversation(app, report_tool(batch))
            # The conversations register the story's 45 minutes; in real time it is seconds.
            app.tools[TOOL].deadline = DEADLINE_SECONDS
            console.print(
                f"[bold]longcall demo[/bold]: the 19-minute report through the service at "
                f"{base}, minutes played as seconds, with {agent_name} ({url})\n",
                highlight=False,
            )
            line = Timeline(console, seconds_since(time.monotonic()))
            service = Service(app, chat, line, base, token, batch)
            with _signals_after_drain():
                return asyncio.run(
                    serve_and_play(service, console, sock=sock, secret=secret, keep_serving=serve)
                )


def report_tool(batch: BatchSystem) -> ReportTool:
    """The long-running tool of the example, submitting to ``batch``."""

    def start_sales_report(quarter: str, region: str, job: JobHandle) -> dict[str, Any]:
        """Starts a sales report build for a quarter (like 2026-Q3) and a region code."""
        batch.submit(job)
        return {"message": "Report build started; typical time is 15-25 minutes."}

    return start_sales_report


def _unusable(app: App, sock: socket.socket, port: int) -> str | None:
    """Why the demo cannot run on this database and port, or None."""
    for job_id in (EMEA, APAC):
        with contextlib.suppress(JobNotFound):
            app.get_job(job_id)
            return f"{app.url} holds the demo's job {job_id} already; use a fresh database"
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        return f"cannot listen on 127.0.0.1:{port}: {exc}"
    return None
