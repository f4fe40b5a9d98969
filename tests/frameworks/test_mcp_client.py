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
        working = await desk.app.get_job_async(job.job_id)
        assert (working.state, working.progress) == (JobState.STARTED, None)

        # The remote job's progress becomes the local job's.
        await remote.act(lambda app: app.progress(row["task_id"], "page 2 of 3"))

        async def progressed() -> bool:
            return (await desk.app.get_job_async(job.job_id)).progress == "page 2 of 3"

        await until(progressed, poller.poll_once)

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


def _start_poller(script: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, script], env=env)


def test_poller_process_restarted_mid_wait(sqlite_url: str, remote: RemoteHost) -> None:
    """A poller process killed while the task works; a new one over the same database
    picks the task up and answers the job when the remote job completes."""
    env = {
        **os.environ,
        "LOCAL_URL": sqlite_url,
        "REMOTE_MCP_URL": remote.mcp_url,
        "REMOTE_TOKEN": remote.token,
        "POLL_LEASE": "1",
        "PYTHONPATH": str(TESTS),
    }
    script = str(Path(__file__).with_name("mcp_poller.py"))

    async def scenario() -> None:
        desk = Desk(sqlite_url, remote)
        job = await desk.ask("s2", "Write a report on eclipses")
        first = _start_poller(script, env)
        try:

            async def polled_twice() -> bool:
                row = desk.remote.table.get(job.job_id)
                return row is not None and row["polls"] >= 2

            await until(polled_twice, lambda: asyncio.sleep(0.05))
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        row = desk.remote.table.get(job.job_id)
        assert row is not None
        await remote.act(lambda app: app.complete(row["task_id"], {"totality": "4m"}))
        await asyncio.sleep(0.3)
        assert (await desk.app.get_job_async(job.job_id)).state is JobState.STARTED
        second = _start_poller(script, env)
        try:
            await until(
                state_is(desk.app, job.job_id, JobState.SUCCEEDED), lambda: asyncio.sleep(0.05)
            )
        finally:
            second.send_signal(signal.SIGKILL)
            second.wait(10)
        assert await desk.deliverer.run_once() == 1
        assert [(r[0], r[1], r[2]["status"]) for r in await desk.responses("s2")][-1] == (
            job.call_id,
            "report",
            "succeeded",
        )
        await desk.close()

    asyncio.run(scenario())


def test_remote_failure_and_cancellation(sqlite_url: str, remote: RemoteHost) -> None:
    """A remote job that fails fails the local one; a remote one cancelled cancels it; each
    session is resumed once with that outcome."""

    async def scenario() -> None:
        desk = Desk(sqlite_url, remote)
        failing = await desk.ask("s3", "Write a report on storms")
        cancelled = await desk.ask("s4", "Write a report on droughts")
        task_of = {
            j.job_id: desk.remote.table.get(j.job_id)["task_id"]  # type: ignore[index]
            for j in (failing, cancelled)
        }
        await remote.act(lambda app: app.fail(task_of[failing.job_id], "the archive is offline"))
        await remote.act(lambda app: app.cancel(task_of[cancelled.job_id], "no longer needed"))
        poller = desk.poller()
        await until(state_is(desk.app, failing.job_id, JobState.FAILED), poller.poll_once)
        await until(state_is(desk.app, cancelled.job_id, JobState.CANCELLED), poller.poll_once)
        assert (await desk.app.get_job_async(failing.job_id)).result == {
            "error": "the archive is offline"
        }
        assert await desk.deliverer.run_once() == 2
        assert await desk.deliverer.run_once() == 0
        [_, (call, name, failed)] = await desk.responses("s3")
        assert (call, name, failed["status"]) == (failing.call_id, "report", "failed")
        assert "the archive is offline" in str(failed)
        [_, (call, name, gone)] = await desk.responses("s4")
        assert (call, name, gone["status"]) == (cancelled.call_id, "report", "cancelled")
        assert "no longer needed" in str(gone)
        await desk.close()

    asyncio.run(scenario())


def test_local_answer_first(sqlite_url: str, remote: RemoteHost) -> None:
    """A job answered locally before its task ended is delivered once with that answer and
    its row goes; a job cancelled locally has its remote task cancelled."""

    async def scenario() -> None:
        desk = Desk(sqlite_url, remote)
        answered = await desk.ask("s5", "Write a report on comets")
        dropped = await desk.ask("s6", "Write a report on meteors")
        task_of = {
            j.job_id: desk.remote.table.get(j.job_id)["task_id"]  # type: ignore[index]
            for j in (answered, dropped)
        }
        assert (await desk.app.complete_async(answered.job_id, "from a person")).changed
        await desk.app.cancel_async(dropped.job_id, "the user changed their mind")
        await remote.act(lambda app: app.complete(task_of[answered.job_id], "from the remote"))
        poller = desk.poller()

        async def rows_gone() -> bool:
            return all(desk.remote.table.get(j) is None for j in task_of)

        await until(rows_gone, poller.poll_once)
        assert poller.stats.get("dropped") == 1 and poller.stats.get("cancelled_remote") == 1
        assert (await desk.app.get_job_async(answered.job_id)).result == "from a person"
        remote_cancelled = await remote.act(lambda app: app.get_job(task_of[dropped.job_id]))
        assert remote_cancelled.state is JobState.CANCELLED
        assert await desk.deliverer.run_once() == 2
        assert await desk.deliverer.run_once() == 0
        assert [r[2]["status"] for r in await desk.responses("s5")] == ["pending", "succeeded"]
        await desk.close()

    asyncio.run(scenario())


def test_remote_server_down_for_a_while(sqlite_url: str, remote: RemoteHost) -> None:
    """Polls of a server that is down back off (the row's failures and wait grow); once it
    is back the task's result answers the job."""

    async def scenario() -> None:
        desk = Desk(sqlite_url, remote)
        job = await desk.ask("s7", "Write a report on volcanoes")
        remote.kill()
        poller = desk.poller(base=0.1, cap=0.8)
        waits = []
        for _ in range(3):

            async def failed_more(seen: int = len(waits)) -> bool:
                row = desk.remote.table.get(job.job_id)
                return row is not None and row["failures"] > seen

            await until(failed_more, poller.poll_once)
            row = desk.remote.table.get(job.job_id)
            assert row is not None
            waits.append(row["next_poll_at"] - row["updated_at"])
        assert poller.stats["unreachable"] == 3 and "working" not in poller.stats
        # Jittered ceilings of 0.1, 0.2 and 0.4 seconds: the third wait beats the first.
        assert waits[2] > waits[0]
        assert (await desk.app.get_job_async(job.job_id)).state is JobState.STARTED
        task_id = row["task_id"]
        await remote.act(lambda app: app.complete(task_id, "lava"))
        remote.start()
        await until(state_is(desk.app, job.job_id, JobState.SUCCEEDED), poller.poll_once)
        assert (await desk.app.get_job_async(job.job_id)).result == {"result": "lava"}
        assert await desk.deliverer.run_once() == 1
        await desk.close()

    asyncio.run(scenario())


@pytest.mark.postgres
def test_two_pollers_on_postgres_answer_each_job_once(pg_url: str, remote: RemoteHost) -> None:
    """Two pollers (two Apps, as two processes would have) polling at once over one
    PostgreSQL database claim disjoint rows: every job is completed by exactly one."""

    async def scenario() -> None:
        apps = [longcall.App(pg_url), longcall.App(pg_url)]
        remotes = [RemoteTasks(app, [remote.server()]) for app in apps]
        [tool] = await remotes[0].list_tools("reports")
        jobs = []
        for n in range(6):
            ids = longcall.CallIds(
                app_name="desk", user_id="u", session_id=f"p{n}", call_id=f"c{n}"
            )
            answer = await tool.invoke_async({"topic": f"t{n}"}, ids)
            jobs.append(answer["jobId"])
        tasks = [remotes[0].table.get(j)["task_id"] for j in jobs]  # type: ignore[index]
        await remote.act(lambda app: [app.complete(t, t) for t in tasks])
        pollers = [RemoteTaskPoller(r, base=0.05, cap=0.1, batch=3) for r in remotes]

        async def all_done() -> bool:
            states = [(await apps[0].get_job_async(j)).state for j in jobs]
            return all(s is JobState.SUCCEEDED for s in states)

        async def both() -> None:
            await asyncio.gather(*(p.poll_once() for p in pollers))

        await until(all_done, both)
        completed = [p.stats.get("completed", 0) for p in pollers]
        assert sum(completed) == 6 and all(p.stats.get("already_answered", 0) == 0 for p in pollers)
        for job_id, task_id in zip(jobs, tasks, strict=True):
            assert (await apps[0].get_job_async(job_id)).result == {"result": task_id}
        for app in apps:
            app.close()

    asyncio.run(scenario())


def test_deadline_and_unknown_task(sqlite_url: str, remote: RemoteHost) -> None:
    """A job past its deadline is expired by the sweeper and its remote task cancelled; a
    task the remote server does not know fails its job instead of being polled forever."""

    async def scenario() -> None:
        app = longcall.App(sqlite_url)
        remote_tasks = RemoteTasks(app, [remote.server()])
        [tool] = await remote_tasks.list_tools("reports", deadline=0.2)
        ids = longcall.CallIds(app_name="desk", user_id="u", session_id="d", call_id="c")
        late = (await tool.invoke_async({"topic": "auroras"}, ids))["jobId"]
        task_id = remote_tasks.table.get(late)["task_id"]  # type: ignore[index]
        await asyncio.sleep(0.3)
        assert [j.job_id for j in await asyncio.to_thread(app.sweeper().sweep)] == [late]
        poller = RemoteTaskPoller(remote_tasks, base=0.05, cap=0.1)

        async def remote_cancelled() -> bool:
            job = await remote.act(lambda a: a.get_job(task_id))
            return bool(job.state is JobState.CANCELLED)

        await until(remote_cancelled, poller.poll_once)
        assert remote_tasks.table.get(late) is None

        other_call = longcall.CallIds(app_name="desk", user_id="u", session_id="d", call_id="c2")
        lost, _ = await app.create_job_async("report", {"topic": "lost"}, ids=other_call)
        remote_tasks.table.add(lost.job_id, "reports", "job-nobody-made", delay=0)
        await until(state_is(app, lost.job_id, JobState.FAILED), poller.poll_once)
        failed = await app.get_job_async(lost.job_id)
        assert "job-nobody-made" in str(failed.result) and "not found" in str(failed.result)
        app.close()

    asyncio.run(scenario())


def test_example_runs_as_its_readme_says(tmp_path: Path, remote: RemoteHost) -> None:
    """examples/mcp_adk_client/agent.py against longcall's MCP server: the agent is told
    the translation once the stand-in agency completed the remote job."""
    folder = TESTS.parent / "examples" / "mcp_adk_client"
    # The example's server is examples/mcp_tasks; its `translate` is served here by a server
    # of that folder's app, on the remote host's database and port.
    remote.kill()
    env = {
        **os.environ,
        "LONGCALL_DATABASE_URL": remote.db,
        "PYTHONPATH": str(TESTS.parent / "examples" / "mcp_tasks"),
    }
    with (tmp_path / "agency.log").open("wb") as log:
        agency = subprocess.Popen(
            [LONGCALL, "serve", "--app", "tools:app", "--port", str(remote.port)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        wait_until_healthy(remote.base)
        desk_env = {
            **os.environ,
            "LONGCALL_TOKEN": remote.token,
            "DESK_DATABASE_URL": f"sqlite:///{tmp_path / 'desk.db'}",
        }
        command = [sys.executable, str(folder / "agent.py"), remote.mcp_url]
        done = subprocess.run(
            [*command, "--stand-in-agency", remote.db],
            cwd=tmp_path,
            env=desk_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        agency.send_signal(signal.SIGKILL)
        agency.wait(10)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("agent: I've started translate. sent 'minutes.pdf'")
    assert "'result': {'translation': 'cofnodion.pdf'}" in lines[-2]
    assert lines[-1] == "agent: translate has finished: translation cofnodion.pdf."


def test_resubmitted_dispatch_starts_no_second_task(sqlite_url: str, remote: RemoteHost) -> None:
    """The dispatcher's re-run of a call (attempt 2) finds the remembered task and starts
    none; only when the caller died before remembering it is the task started again."""

    async def scenario() -> None:
        app = longcall.App(sqlite_url)
        remote_tasks = RemoteTasks(app, [remote.server()])
        [tool] = await remote_tasks.list_tools("reports")
        ids = longcall.CallIds(app_name="desk", user_id="u", session_id="r", call_id="c")
        job = await app.get_job_async((await tool.invoke_async({"topic": "fog"}, ids))["jobId"])
        first = remote_tasks.table.get(job.job_id)
        assert first is not None
        again = await tool.call_body_async(longcall.JobHandle.of(job, attempt=2), job.args)
        assert again == f"report is running as task {first['task_id']} on reports"
        assert len(await remote.act(lambda a: a.list_jobs())) == 1
        remote_tasks.table.delete(job.job_id)  # as if the caller died before storing it
        await tool.call_body_async(longcall.JobHandle.of(job, attempt=2), job.args)
        second = remote_tasks.table.get(job.job_id)
        assert second is not None and second["task_id"] != first["task_id"]
        assert len(await remote.act(lambda a: a.list_jobs())) == 2
        app.close()

    asyncio.run(scenario())
