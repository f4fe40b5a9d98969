"""The MCP client side: an ADK agent calls a remote MCP tool that answers with a task.

The remote server is longcall's own (`longcall serve --app mcp_app:app` with /mcp) in another
process, on a database of its own; the agent runs on the scripted model through ADK's MCP
toolset wrapped by longcall.mcp_adk. The remote job is completed from outside (CLI or an App
on the remote database), a poller sees the task end and answers the local job, and the
deliverer resumes the ADK session once under the original call id and tool name.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import longcall
from longcall import JobState

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed")
mcp_adk = pytest.importorskip("longcall.mcp_adk", reason="the mcp extra is not installed")
pytest.importorskip("longcall.server", reason="the server extra is not installed")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402

from longcall.errors import ConfigError  # noqa: E402
from longcall.mcp import RemoteServer, RemoteTaskPoller, RemoteTasks  # noqa: E402
from procs import free_port, wait_until_healthy  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
LONGCALL = str(Path(sys.executable).parent / "longcall")


class RemoteHost:
    """longcall's MCP server in its own process, on its own SQLite database."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.db = f"sqlite:///{tmp_path / 'remote.db'}"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.base}/mcp"
        with longcall.App(self.db) as app:
            self.token = app.access.create_token(user_id="alice")[1]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "LONGCALL_DATABASE_URL": self.db, "PYTHONPATH": str(TESTS)}
        with (self.tmp_path / "remote.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [LONGCALL, "serve", "--app", "mcp_app:app", "--port", str(self.port)],
                cwd=TESTS,
                env=env,
                stdout=log,
                stderr=log,
            )
        wait_until_healthy(self.base)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def server(self) -> RemoteServer:
        return RemoteServer(
            "reports", self.mcp_url, headers={"authorization": f"Bearer {self.token}"}
        )

    async def act(self, act: Callable[[longcall.App], Any]) -> Any:
        """``act`` on an App over the remote database, as the remote's outside system."""

        def run() -> Any:
            with longcall.App(self.db) as app:
                return act(app)

        return await asyncio.to_thread(run)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[RemoteHost]:
    host = RemoteHost(tmp_path)
    host.start()
    yield host
    host.kill()


class Desk:
    """The local side: an ADK agent whose ``report`` tool is the remote server's."""

    def __init__(self, url: str, host: RemoteHost) -> None:
        self.app = longcall.App(url)
        self.remote = RemoteTasks(self.app, [host.server()])
        self.toolset = mcp_adk.LongcallMcpToolset(self.remote, "reports")
        llm = adk.ScriptedLlm(
            rules=[longcall.Rule(r"report on (\w+)", calls=[("report", lambda m: {"topic": m[1]})])]
        )
        self.sessions = InMemorySessionService()
        self.runner = Runner(
            app=AdkApp(
                name="desk",
                root_agent=LlmAgent(name="writer", model=llm, tools=[self.toolset]),
                plugins=[adk.LongcallPlugin(self.app)],
            ),
            session_service=self.sessions,
        )
        self.deliverer = self.app.deliverer(adk.AdkAgentRunner(self.runner))

    def poller(self, **options: Any) -> RemoteTaskPoller:
        return RemoteTaskPoller(self.remote, **{"base": 0.05, "cap": 0.2, **options})

    async def ask(self, session_id: str, text: str) -> longcall.Job:
        """One user turn that makes the model call ``report``; the job it recorded."""
        await self.sessions.create_session(app_name="desk", user_id="u", session_id=session_id)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        events = [
            e
            async for e in self.runner.run_async(
                user_id="u", session_id=session_id, new_message=message
            )
        ]
        call_ids = set().union(*(e.long_running_tool_ids or set() for e in events))
        [job] = [j for j in await self.app.list_jobs_async() if j.session_id == session_id]
        assert call_ids == {job.call_id}
        assert (job.app_name, job.user_id, job.tool_name) == ("desk", "u", "report")
        return job

    async def responses(self, session_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        session = await self.sessions.get_session(
            app_name="desk", user_id="u", session_id=session_id
        )
        assert session is not None
        return [
            (r.id or "", r.name or "", dict(r.response or {}))
            for e in session.events
            for r in e.get_function_responses()
        ]

    async def close(self) -> None:
        await self.toolset.close()
        self.app.close()


async def until(check: Callable[[], Awaitable[bool]], step: Callable[[], Awaitable[Any]]) -> None:
    """Run ``step`` until ``check`` holds (at most 20 seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not await check():
        assert loop.time() < deadline, "gave up waiting"
        await step()
        await asyncio.sleep(0.05)


def state_is(app: longcall.App, job_id: str, state: JobState) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await app.get_job_async(job_id)).state is state

    return check


def _complete_by_cli(db: str, task_id: str, result: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LONGCALL, "jobs", "complete", task_id, "--database", db, "--result", result],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_adk_agent_resumed_once_with_the_remote_result(db_url: str, remote: RemoteHost) -> None:
    """The model's call is a local job joined to the session and call, waiting on a remote
    task; the remote job completed by the CLI resumes the session once with its result."""

    async def scenario() -> None:
        desk = Desk(db_url, remote)
        job = await desk.ask("s1", "Write a report on tides")
        [(call_id, name, pending)] = await desk.responses("s1")
        assert (call_id, name, pending["status"]) == (job.call_id, "report", "pending")
        row = desk.remote.table.get(job.job_id)
        assert row is not None and row["server"] == "reports"
        assert pending["remoteTaskId"] == row["task_id"]
        remote_job = await remote.act(lambda app: app.get_job(row["task_id"]))
        assert (remote_job.state, remote_job.user_id, remote_job.args) == (
            JobState.STARTED,
            "alice",
            {"topic": "tides", "pages": 1},
        )
        poller = desk.poller()
        await until(lambda: _polled(poller), poller.poll_once)
        assert (await desk.app.get_job_async(job.job_id)).state is JobState.STARTED

        done = await asyncio.to_thread(
            _complete_by_cli, remote.db, row["task_id"], '{"summary": "high at noon"}'
        )
        assert done.returncode == 0, done.stderr
        await until(state_is(desk.app, job.job_id, JobState.SUCCEEDED), poller.poll_once)
        assert desk.remote.table.get(job.job_id) is None
        assert (await desk.app.get_job_async(job.job_id)).result == {"summary": "high at noon"}
        assert await desk.deliverer.run_once() == 1

        # A duplicate completion, locally and remotely: nothing more reaches the session.
        late = await desk.app.complete_async(job.job_id, "again")
        assert late.changed is False
        await remote.act(lambda app: app.complete(row["task_id"], "again"))
        assert await poller.poll_once() == 0
        assert await desk.deliverer.run_once() == 0
        responses = await desk.responses("s1")
        assert [(r[0], r[1], r[2]["status"]) for r in responses] == [
            (job.call_id, "report", "pending"),
            (job.call_id, "report", "succeeded"),
        ]
        assert responses[1][2]["result"] == {"summary": "high at noon"}
        await desk.close()

    asyncio.run(scenario())


async def _polled(poller: RemoteTaskPoller) -> bool:
    return poller.stats.get("working", 0) >= 1


def test_bad_configuration_is_refused(sqlite_url: str) -> None:
    """A server without an http(s) URL, two servers of one name, an unknown server name and
    nonsense poll timings are clear errors."""
    with pytest.raises(ConfigError, match="not an http"):
        RemoteServer("reports", "ftp://example.com/mcp")
    with pytest.raises(ConfigError, match="needs a name"):
        RemoteServer("", "https://example.com/mcp")
    server = RemoteServer("reports", "https://example.com/mcp", headers={"authorization": "x"})
    assert "authorization" not in repr(server)
    with longcall.App(sqlite_url) as app:
        with pytest.raises(ConfigError, match="two remote MCP servers"):
            RemoteTasks(app, [server, server])
        remote = RemoteTasks(app, [server])
        with pytest.raises(ConfigError, match="no remote MCP server named 'other'"):
            mcp_adk.LongcallMcpToolset(remote, "other")
        with pytest.raises(ValueError, match="base <= cap"):
            RemoteTaskPoller(remote, base=5, cap=1)


def test_importing_longcall_imports_neither_mcp_nor_adk() -> None:
    code = (
        "import sys, longcall, longcall.testing; "
        "print(any(m.split('.')[0] in ('mcp', 'google') or m.startswith('longcall.mcp') "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
