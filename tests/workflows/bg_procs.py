"""A background-run worker in its own process, for the multi-process run tests.

Run by path: ``python tests/workflows/bg_procs.py --url URL --effects FILE [options]``. It
builds an :class:`~longcall.App` on ``URL`` with the workflows of :func:`build_app` and runs a
:class:`~longcall.workflows.run_worker.RunWorker` until SIGTERM (or SIGINT), then prints
``{"executed": N}`` and exits 0. SIGKILL is what the crash tests send instead.

Every task appends ``<run_id> <task> <pid>`` to ``--effects`` before it does its work (one
``write`` with ``O_APPEND``, so a line is whole even when the process is killed), one file per
process. The test process imports :func:`build_app` too, to submit runs of the same workflows,
and :func:`read_effects` and :func:`sql_rows` to check what happened.

Workflows:

=============  ===========================================================================
triple         ``n`` through tasks ``t1``, ``t2``, ``t3``, each ``total * 10 + k``:
               the result is ``n * 1000 + 123``
ticker_sync    ``rounds`` calls of ``tick_sync`` (0.2 s each); emits ``cancel-seen``
               (``{"at": i}``) when it notices ``ctx.cancelled`` before call ``i``
ticker_async   the same with ``tick_async``
sleeper_async  one ``long_wait`` task that sleeps a minute, emitting ``task-saw-cancel``
               once it sees ``ctx.cancelled`` (it keeps sleeping: only the grace ends it)
=============  ===========================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from longcall import App
from longcall.workflows import TaskContext

TICK = 0.2  # seconds each ticker task takes


def log_effect(path: Path | None, run_id: str, task: str) -> None:
    """Append ``<run_id> <task> <pid>`` to ``path`` in one write (whole with O_APPEND)."""
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {task} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def read_effects(*paths: Path) -> list[tuple[str, str, int]]:
    """The ``(run_id, task, pid)`` lines of the files, each file in the order written."""
    lines = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().split("\n"):
            if line:
                run_id, task, pid = line.split()
                lines.append((run_id, task, int(pid)))
    return lines


def sql_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """Run one read-only query on either database, outside longcall."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(urlsplit(url).path[1:], timeout=10)
        try:
            return list(conn.execute(query).fetchall())
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as pg:
        return [tuple(r) for r in pg.execute(query).fetchall()]


def watch_locks(url: str) -> int:
    """Advisory locks granted in this PostgreSQL database: the run workers' watch is one."""
    rows = sql_rows(
        url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    return int(rows[0][0])


def build_app(
    url: str,
    effects: Path | None = None,
    *,
    lease: str = "2s",
    task_sleep: float = 0.01,
) -> App:
    """The App with the workflows in the module docstring; tasks log to ``effects``."""
    app = App(url, run_lease=lease, run_retry="50ms")

    def make_step(number: int) -> Any:
        def step(total: int, ctx: TaskContext) -> int:
            log_effect(effects, ctx.run_id, f"t{number}")
            time.sleep(task_sleep)
            return total * 10 + number

        return app.task(step, name=f"t{number}")

    steps = [make_step(k) for k in (1, 2, 3)]

    @app.workflow("triple")
    def triple(n: int) -> int:
        total = n
        for step in steps:
            total = step(total)
        return total

    @app.task(name="tick_sync")
    def tick_sync(i: int, ctx: TaskContext) -> int:
        log_effect(effects, ctx.run_id, f"tick{i}")
        time.sleep(TICK)
        return i

    @app.workflow("ticker_sync")
    def ticker_sync(rounds: int, ctx: TaskContext) -> int:
        done = 0
        for i in range(rounds):
            if ctx.cancelled:
                ctx.emit("cancel-seen", {"at": i})
            tick_sync(i)
            done += 1
        return done

    @app.task(name="tick_async")
    async def tick_async(i: int, ctx: TaskContext) -> int:
        log_effect(effects, ctx.run_id, f"tick{i}")
        await asyncio.sleep(TICK)
        return i

    @app.workflow("ticker_async")
    async def ticker_async(rounds: int, ctx: TaskContext) -> int:
        done = 0
        for i in range(rounds):
            if ctx.cancelled:
                ctx.emit("cancel-seen", {"at": i})
            await tick_async(i)
            done += 1
        return done

    @app.task(name="long_wait")
    async def long_wait(seconds: float, ctx: TaskContext) -> str:
        log_effect(effects, ctx.run_id, "long_wait")
        told = False
        give_up = time.monotonic() + seconds
        while time.monotonic() < give_up:
            if ctx.cancelled and not told:
                ctx.emit("task-saw-cancel")
                told = True
            await asyncio.sleep(0.05)
        return "slept"

    @app.workflow("sleeper_async")
    async def sleeper_async(seconds: float) -> str:
        return str(await long_wait(seconds))

    return app


async def serve(app: App, *, concurrency: int, grace: str) -> int:
    """Run a RunWorker until SIGTERM or SIGINT; the number of executions it finished."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = app.run_worker(concurrency=concurrency, poll_interval="100ms", grace=grace)
    await worker.run(stop)
    return worker.executed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--grace", default="1s")
    parser.add_argument("--lease", default="2s")
    parser.add_argument("--task-sleep", type=float, default=0.01)
    args = parser.parse_args(argv)
    app = build_app(args.url, args.effects, lease=args.lease, task_sleep=args.task_sleep)
    try:
        executed = asyncio.run(serve(app, concurrency=args.concurrency, grace=args.grace))
    finally:
        app.close()
    print(json.dumps({"executed": executed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
