"""longcall's MCP Tasks server, driven by the MCP SDK's own client against real processes.

`longcall serve` (with /mcp) and `python -m longcall.mcp` (stdio) run as subprocesses on a
store the test also opens, so completions come from outside the server, as in production.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

pytest.importorskip("longcall.mcp", reason="the mcp extra is not installed")
pytest.importorskip("longcall.server", reason="the server extra is not installed")

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.jsonrpc import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY

from longcall import App, JobState
from mcp_client import TASKS, TasksExtension, cancel, create, get, http_session, run_example_client
from procs import free_port, wait_until_healthy

HERE = Path(__file__).resolve().parent
T = TypeVar("T")
LONGCALL = str(Path(sys.executable).parent / "longcall")


def _env(url: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LONGCALL_DATABASE_URL": url,
        "PYTHONPATH": str(HERE),
        "MCP_TEST_CANCELS": str(tmp_path / "cancels.txt"),
    }


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], str]]]:
    """Start `longcall serve --app mcp_app:app` on a free port; every one is reaped."""
    started: list[subprocess.Popen[bytes]] = []

    def start(url: str) -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        with (tmp_path / f"serve-{port}.log").open("wb") as log:
            proc = subprocess.Popen(
                [LONGCALL, "serve", "--app", "mcp_app:app", "--port", str(port)],
                cwd=HERE,
                env=_env(url, tmp_path),
                stdout=log,
                stderr=log,
            )
        started.append(proc)
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        return proc, base

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)


async def outside(url: str, act: Callable[[App], T]) -> T:
    """``act`` on an App of our own over the server's store, as an outside system would."""

    def run() -> T:
        with App(url) as app:
            return act(app)

    return await asyncio.to_thread(run)


def _tokens(url: str) -> dict[str, str]:
    with App(url) as app:
        return {user: app.access.create_token(user_id=user)[1] for user in ("alice", "mallory")} | {
            "admin": app.access.create_token(user_id=None, admin=True)[1]
        }


def _complete_by_cli(url: str, job_id: str, result: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LONGCALL, "jobs", "complete", job_id, "--database", url, "--result", result],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_http_task_created_polled_completed(db_url: str, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A task-augmented call creates the job; tasks/get shows progress, then the result
    the CLI completed it with; a second completion changes nothing."""
    tokens = _tokens(db_url)
    _, base = serve(db_url)

    async def scenario() -> None:
        async with http_session(base, tokens["alice"]) as session:
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["report"]
            created = await create(session, "report", {"topic": "tides", "pages": 3})
            assert created.status == "working"
            job = await outside(db_url, lambda app: app.get_job(created.task_id))
            assert (job.state, job.user_id, job.args) == (
                JobState.STARTED,
                "alice",
                {"topic": "tides", "pages": 3},
            )
            working = await get(session, created.task_id)
            assert working["status"] == "working"
            assert working["statusMessage"] == "a 3-page report on tides is being written"
            assert "result" not in working
            await outside(db_url, lambda app: app.progress(created.task_id, "page 2 of 3"))
            assert (await get(session, created.task_id))["statusMessage"] == "page 2 of 3"

            done = await asyncio.to_thread(
                _complete_by_cli,
                db_url,
                created.task_id,
                '{"summary": "high at noon"}',
            )
            assert done.returncode == 0, done.stderr
            finished = await get(session, created.task_id)
            assert finished["status"] == "completed"
            assert finished["result"]["structuredContent"] == {"summary": "high at noon"}
            assert finished["result"]["isError"] is False

            late = await outside(db_url, lambda app: app.complete(created.task_id, "late"))
            assert late.changed is False
            again = await get(session, created.task_id)
            assert again["result"] == finished["result"]

    asyncio.run(scenario())


def test_restart_mid_task(sqlite_url: str, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server killed mid-task and started again answers for the task it created."""
    tokens = _tokens(sqlite_url)
    first, base = serve(sqlite_url)

    async def before() -> str:
        async with http_session(base, tokens["alice"]) as session:
            return (await create(session, "report", {"topic": "eclipses"})).task_id

    task_id = asyncio.run(before())
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    _, base = serve(sqlite_url)

    async def after() -> None:
        async with http_session(base, tokens["alice"]) as session:
            assert (await get(session, task_id))["status"] == "working"
            done = await outside(sqlite_url, lambda app: app.complete(task_id, "totality"))
            assert done.changed
            finished = await get(session, task_id)
            assert finished["status"] == "completed"
            assert finished["result"]["structuredContent"] == {"result": "totality"}

    asyncio.run(after())


@pytest.mark.postgres
def test_two_servers_share_tasks(pg_url: str, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With PostgreSQL, a task created through one server is polled, cancelled and read
    through another; the tool's on_cancel hook runs once."""
    tokens = _tokens(pg_url)
    _, one = serve(pg_url)
    _, two = serve(pg_url)

    async def scenario() -> str:
        async with http_session(one, tokens["alice"]) as first:
            created = await create(first, "report", {"topic": "glaciers"})
            kept = await create(first, "report", {"topic": "moraines"})
        async with http_session(two, tokens["alice"]) as second:
            assert (await get(second, created.task_id))["status"] == "working"
            await cancel(second, created.task_id)
            done = await outside(pg_url, lambda app: app.complete(kept.task_id, {"pages": 12}))
            assert done.changed
        async with http_session(one, tokens["alice"]) as first:
            cancelled = await get(first, created.task_id)
            assert cancelled["status"] == "cancelled"
            assert cancelled["statusMessage"] == "cancelled by the MCP client"
            assert (await get(first, kept.task_id))["result"]["structuredContent"] == {"pages": 12}
        return created.task_id

    cancelled_id = asyncio.run(scenario())
    cancels = tmp_path / "cancels.txt"
    _wait(lambda: cancels.exists() and cancels.read_text().split() == [cancelled_id])


def _wait(predicate: Callable[[], bool], seconds: float = 15) -> None:
    import time

    give_up = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(0.05)


def test_cancel_then_late_completion(sqlite_url: str, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """tasks/cancel cancels the job and runs on_cancel; a second cancel is acknowledged and
    a late completion changes nothing."""
    tokens = _tokens(sqlite_url)
    _, base = serve(sqlite_url)

    async def scenario() -> str:
        async with http_session(base, tokens["alice"]) as session:
            created = await create(session, "report", {"topic": "storms"})
            await cancel(session, created.task_id)
            await cancel(session, created.task_id)
            late = await outside(sqlite_url, lambda app: app.complete(created.task_id, "late"))
            assert late.changed is False
            assert late.job.state is JobState.CANCELLED
            got = await get(session, created.task_id)
            assert got["status"] == "cancelled"
            assert "result" not in got
            return created.task_id

    task_id = asyncio.run(scenario())
    cancels = tmp_path / "cancels.txt"
    _wait(lambda: cancels.exists() and cancels.read_text().split() == [task_id])


def _raw_tasks_get(base: str, token: str, task_id: str, name_header: str) -> dict[str, object]:
    """tasks/get by hand, with the routing headers a 2026-07-28 client sends."""
    import httpx

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tasks/get",
        "params": {"taskId": task_id, "_meta": meta},
    }
    headers = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tasks/get",
        "mcp-name": name_header,
    }
    answer: dict[str, object] = httpx.post(f"{base}/mcp", json=body, headers=headers).json()
    return answer


def test_bad_input_gets_clear_errors_and_changes_nothing(sqlite_url: str, serve) -> None:  # type: ignore[no-untyped-def]
    """Unknown task ids, another user's task, bad arguments, unknown tools, a client
    without the extension, an Mcp-Name header naming another task and a request without a
    token are refused; no job is made. An admin token sees every task."""
    import httpx

    tokens = _tokens(sqlite_url)
    _, base = serve(sqlite_url)
    unauthorized = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
    assert unauthorized.status_code == 401

    async def scenario() -> None:
        async with http_session(base, tokens["alice"]) as session:
            created = await create(session, "report", {"topic": "fog"})
            for bad_id in ("job-nope", "x" * 5000, "\u0000"):
                with pytest.raises(MCPError) as unknown:
                    await get(session, bad_id)
                assert unknown.value.error.code == INVALID_PARAMS
                assert "not found" in unknown.value.error.message
            with pytest.raises(MCPError) as bad_args:
                await create(session, "report", {"topic": 7, "colour": "red"})
            assert bad_args.value.error.code == INVALID_PARAMS
            assert bad_args.value.error.data == {
                "errors": {
                    "topic": "Input should be a valid string",
                    "colour": "unexpected argument",
                }
            }
            with pytest.raises(MCPError) as unknown_tool:
                await create(session, "reprot", {"topic": "fog"})
            assert "unknown tool 'reprot'" in unknown_tool.value.error.message
        async with http_session(base, tokens["mallory"]) as stranger:
            for attempt in (get, cancel):
                with pytest.raises(MCPError) as hidden:
                    await attempt(stranger, created.task_id)
                assert hidden.value.error.code == INVALID_PARAMS
        async with http_session(base, tokens["admin"]) as admin:
            assert (await get(admin, created.task_id))["status"] == "working"
        mismatched = await asyncio.to_thread(
            _raw_tasks_get, base, tokens["alice"], created.task_id, "job-someone-else"
        )
        assert mismatched["error"]["code"] == HEADER_MISMATCH, mismatched
        matched = await asyncio.to_thread(
            _raw_tasks_get, base, tokens["alice"], created.task_id, created.task_id
        )
        assert matched["result"]["status"] == "working", matched
        async with http_session(base, tokens["alice"], tasks=False) as plain:
            with pytest.raises(MCPError) as refused:
                await plain.call_tool("report", {"topic": "fog"})
            assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        jobs = await outside(sqlite_url, lambda app: app.list_jobs())
        assert [(j.job_id, j.state) for j in jobs] == [(created.task_id, JobState.STARTED)]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "command",
    [[sys.executable, "-m", "longcall.mcp"], [LONGCALL, "mcp"]],
    ids=["python-m", "cli"],
)
def test_stdio_task(sqlite_url: str, tmp_path: Path, command: list[str]) -> None:
    """Over stdio (`python -m longcall.mcp`, `longcall mcp`): create, complete from
    outside, fetch the result."""
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "--app", "mcp_app:app"],
        env=_env(sqlite_url, tmp_path),
        cwd=str(HERE),
    )

    async def scenario() -> None:
        async with Client(params, extensions=[TasksExtension()]) as client:
            created = await create(client.session, "report", {"topic": "dunes"})
            assert (await get(client.session, created.task_id))["status"] == "working"
            done = await outside(
                sqlite_url, lambda app: app.complete(created.task_id, {"height_m": 180})
            )
            assert done.changed
            finished = await get(client.session, created.task_id)
            assert finished["result"]["structuredContent"] == {"height_m": 180}

    asyncio.run(scenario())


def test_fastmcp_tasks_client_drives_longcall_tasks(sqlite_url: str, serve) -> None:  # type: ignore[no-untyped-def]
    """FastMCP's own tasks client works unchanged: its explicit task handle (status, result,
    cancel) and its transparent call_tool, which polls tasks/get to the result."""
    fastmcp = pytest.importorskip("fastmcp")
    from fastmcp_tasks import call_tool_task

    tokens = _tokens(sqlite_url)
    _, base = serve(sqlite_url)

    async def complete_when_created(topic: str, result: object) -> None:
        def find(app: App) -> str | None:
            jobs = [j for j in app.list_jobs() if j.args.get("topic") == topic]
            return jobs[0].job_id if jobs else None

        for _ in range(400):  # 20 s
            job_id = await outside(sqlite_url, find)
            if job_id is not None:
                await outside(sqlite_url, lambda app, job_id=job_id: app.complete(job_id, result))
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"no job for {topic!r} was created")

    async def scenario() -> None:
        async with fastmcp.Client(f"{base}/mcp", auth=tokens["alice"]) as client:
            task = await call_tool_task(client, "report", {"topic": "reefs"})
            assert (await task.status()).status == "working"
            await complete_when_created("reefs", {"corals": 31})
            handled = await task.result()
            assert handled.structured_content == {"corals": 31}

            completing = asyncio.create_task(complete_when_created("kelp", "tall"))
            transparent = await client.call_tool("report", {"topic": "kelp"}, timeout=20)
            await completing
            assert transparent.structured_content == {"result": "tall"}

            doomed = await call_tool_task(client, "report", {"topic": "atolls"})
            await doomed.cancel()
            assert (await doomed.status()).status == "cancelled"

    asyncio.run(scenario())


def test_example_mcp_tasks_runs_as_its_readme_says(tmp_path: Path) -> None:
    """examples/mcp_tasks: a token, `longcall serve --app tools:app`, then client.py creates
    a task, completes its job and prints the result."""
    client = run_example_client(tmp_path, "tools:app", "client.py")
    assert client.returncode == 0, client.stderr
    lines = client.stdout.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "working",
        "working (sent 'minutes.pdf' to the agency for Welsh)",
        "completed: {'translation': 'cofnodion.pdf'}",
    ], client.stdout


def test_serve_says_it_serves_mcp(sqlite_url: str, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`longcall serve` names /mcp in its banner, and runs the worker loops for the App's
    tools though it has no agent (deadlines and cancel hooks of MCP tasks need them)."""
    _serve_proc, base = serve(sqlite_url)
    port = base.rsplit(":", 1)[1]
    banner = (tmp_path / f"serve-{port}.log").read_text()
    assert "API, dashboard and MCP tasks at /mcp; worker: deadlines" in banner, banner
