"""MCP Tasks: longcall's server (SQLite, PostgreSQL) beside FastMCP with fastmcp-tasks (Redis).

    python bench/mcp.py [--tasks 200] [--latency 30] [--pg postgresql://postgres@127.0.0.1/postgres]

For each server, in its own process on a free port, one MCP client (the ``mcp`` SDK's, with
the tasks extension) measures, in this order:

- create: task-augmented ``tools/call`` per second (16 in flight);
- complete: completions per second from outside the server (longcall: ``app.complete`` on
  the same store; FastMCP: an ``LPUSH`` its waiting tool function pops, the nearest thing it
  has to a completion from outside);
- fetch: ``tasks/get`` of a finished task, with its result, per second (16 in flight);
- latency: from the completion to a client polling ``tasks/get`` every 5 ms seeing it
  (median and 95th percentile of ``--latency`` tasks, one at a time).

The FastMCP tool runs on Docket's worker (concurrency above ``--tasks``) and blocks until
its completion arrives, so both servers hold every task open at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
# Run as a script, this file's folder comes first on sys.path and its name would hide the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx2  # noqa: E402
import mcp_types  # noqa: E402
from mcp.client import Client, ClientSession  # noqa: E402
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

sys.path.insert(0, str(HERE))
from pg_databases import BenchDatabases, add_prefix_option  # noqa: E402
from served import free_port  # noqa: E402

IN_FLIGHT = 16
REDIS = "redis://127.0.0.1:6379/0"


class CreatedTask(mcp_types.Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")


class Detailed(mcp_types.Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    status: str


class TaskId(mcp_types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class GetTask(mcp_types.Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskId


async def _keep(created: CreatedTask, ctx: ClaimContext) -> mcp_types.CallToolResult:
    raise RuntimeError("the benchmark polls its tasks itself")


class Tasks(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_keep),)


# -- the servers --------------------------------------------------------------------------


def serve_longcall(url: str, port: int) -> None:
    from longcall import App
    from longcall.server import runner
    from longcall.server.app import Settings

    app = App(url)

    @app.long_running
    def work(n: int) -> str:
        """Benchmark work, completed from outside."""
        return "submitted"

    # Every MCP request is a POST, which --writes-per-token (default 4) limits per token.
    settings = Settings(writes_per_token=IN_FLIGHT)
    sockets = [runner.listen("127.0.0.1", port)]
    asyncio.run(runner.serve(app, settings=settings, port=port, sockets=sockets))


def serve_fastmcp(docket: str, port: int, concurrency: int) -> None:
    import redis.asyncio as redis
    from fastmcp import FastMCP
    from fastmcp_tasks import TasksExtension

    server = FastMCP("bench")
    server.add_extension(TasksExtension(url=REDIS, name=docket, concurrency=concurrency))
    completions = redis.Redis.from_url(REDIS)

    @server.tool(task=True)
    async def work(n: int) -> dict[str, Any]:
        """Benchmark work, completed from outside."""
        popped = await completions.blpop([f"{docket}:done:{n}"], timeout=0)
        return {"n": n, "result": popped[1].decode() if popped else None}

    server.run(transport="http", host="127.0.0.1", port=port, show_banner=False)


@dataclass
class Side:
    name: str
    command: list[str]
    headers: dict[str, str]
    complete: Callable[[str, int], Awaitable[None]]  # (task id, n)
    close: Callable[[], None]


def longcall_side(name: str, url: str, port: int) -> Side:
    from longcall import App

    app = App(url)
    token = app.access.create_token(user_id="bench")[1]

    async def complete(task_id: str, n: int) -> None:
        await app.complete_async(task_id, {"n": n})

    command = [sys.executable, __file__, "--serve", "longcall", "--db", url, "--port", str(port)]
    return Side(name, command, {"authorization": f"Bearer {token}"}, complete, app.close)


def fastmcp_side(port: int, concurrency: int) -> Side:
    import redis.asyncio as redis

    docket = f"longcall-bench-{uuid.uuid4().hex[:8]}"
    pusher = redis.Redis.from_url(REDIS)

    async def complete(task_id: str, n: int) -> None:
        await pusher.lpush(f"{docket}:done:{n}", str(n))

    command = [
        *(sys.executable, __file__, "--serve", "fastmcp", "--db", docket),
        *("--port", str(port), "--concurrency", str(concurrency)),
    ]

    def forget() -> None:
        # Every key this run made starts with its docket's unique name; nothing else goes.
        import redis as sync_redis

        with sync_redis.Redis.from_url(REDIS) as client:
            for key in client.scan_iter(match=f"{docket}*", count=1000):
                client.delete(key)

    return Side("FastMCP + fastmcp-tasks, Redis", command, {}, complete, forget)


# -- the measurements ---------------------------------------------------------------------


async def _gather(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def _get(session: ClientSession, task_id: str) -> Detailed:
    return await session.send_request(GetTask(params=TaskId(task_id=task_id)), Detailed)


async def _until_completed(session: ClientSession, task_id: str, every: float) -> None:
    for _ in range(int(60 / every)):
        if (await _get(session, task_id)).status == "completed":
            return
        await asyncio.sleep(every)
    raise SystemExit(f"task {task_id} did not complete within 60 s")


async def _create(session: ClientSession, n: int) -> str:
    created = await session.call_tool("work", {"n": n}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created.task_id


async def measure(side: Side, port: int, tasks: int, latency_tasks: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    async with (
        httpx2.AsyncClient(headers=side.headers, timeout=60) as http,
        Client(
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
            extensions=[Tasks()],
        ) as client,
    ):
        session = client.session
        started = time.perf_counter()
        ids = await _gather([lambda n=n: _create(session, n) for n in range(tasks)])
        figures["create/s"] = tasks / (time.perf_counter() - started)
        started = time.perf_counter()
        for n, task_id in enumerate(ids):
            await side.complete(task_id, n)
        figures["complete/s"] = tasks / (time.perf_counter() - started)
        for task_id in ids:  # wait until every task shows its result
            await _until_completed(session, task_id, 0.01)
        started = time.perf_counter()
        got = await _gather([lambda t=t: _get(session, t) for t in ids])
        figures["fetch/s"] = tasks / (time.perf_counter() - started)
        assert all((g.model_extra or {}).get("result") for g in got), got[:1]

        seen: list[float] = []
        for n in range(tasks, tasks + latency_tasks):
            task_id = await _create(session, n)
            await asyncio.sleep(0.05)  # the FastMCP worker has picked the task up by now
            completed_at = time.perf_counter()
            await side.complete(task_id, n)
            await _until_completed(session, task_id, 0.005)
            seen.append(time.perf_counter() - completed_at)
        figures["latency p50 ms"] = statistics.median(seen) * 1000
        figures["latency p95 ms"] = statistics.quantiles(seen, n=20)[18] * 1000
    return figures


def run_side(side: Side, port: int, args: argparse.Namespace, log: Path) -> dict[str, float]:
    with log.open("ab") as out:
        proc = subprocess.Popen(side.command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"{side.name} did not come up; see {log}") from None
                time.sleep(0.1)
        return asyncio.run(measure(side, port, args.tasks, args.latency))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        side.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--latency", type=int, default=30, help="tasks timed one at a time")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--no-fastmcp", action="store_true", help="skip FastMCP (no Redis)")
    add_prefix_option(parser)
    parser.add_argument("--serve", choices=["longcall", "fastmcp"], help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "longcall":
        serve_longcall(args.db, args.port)
        return 0
    if args.serve == "fastmcp":
        serve_fastmcp(args.db, args.port, args.concurrency)
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-mcp-"))
    log = tmp / "servers.log"
    databases = BenchDatabases(args.pg, args.db_prefix)
    rows: dict[str, dict[str, float]] = {}
    try:
        sides = [
            (
                "longcall, SQLite",
                lambda p: longcall_side("longcall, SQLite", f"sqlite:///{tmp / 'mcp.db'}", p),
            ),
            (
                "longcall, PostgreSQL",
                lambda p: longcall_side("longcall, PostgreSQL", databases.fresh("mcp"), p),
            ),
        ]
        if not args.no_fastmcp:
            concurrency = args.tasks + args.latency + 10
            sides.append(("FastMCP + fastmcp-tasks, Redis", lambda p: fastmcp_side(p, concurrency)))
        for name, make in sides:
            port = free_port()
            rows[name] = run_side(make(port), port, args, log)
    finally:
        databases.drop_all()
    columns = ["create/s", "complete/s", "fetch/s", "latency p50 ms", "latency p95 ms"]
    print(f"{args.tasks} tasks, {args.latency} timed one at a time, {os.cpu_count()} CPUs")
    print(f"{'':<32}" + "".join(f"{c:>16}" for c in columns))
    for name, figures in rows.items():
        print(f"{name:<32}" + "".join(f"{figures[c]:>16,.1f}" for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
