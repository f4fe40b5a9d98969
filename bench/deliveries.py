"""Deliveries per second through one worker: concurrent against one at a time, same run.

Run:  python bench/deliveries.py                  (SQLite, then PostgreSQL)
      python bench/deliveries.py --sessions 100 --per-session 2 --turn 0.05 --deliveries 16
      python bench/deliveries.py --skip-postgres
      python bench/deliveries.py --pg postgresql://postgres@127.0.0.1/postgres

A hundred sessions each have completed jobs waiting (each job its own invocation, so its own
message); the agent's turn takes 50 ms, as a fast model's would. One deliverer loop (the one a
worker runs) delivers them all, first with ``deliveries=1`` (one session at a time, what a
worker did before), then with the default bound, on a fresh database each. The figure is
jobs delivered and marked per second; the target is at least 10x for the concurrent loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import longcall
from longcall.agents import AgentEvent, Message
from pg_databases import BenchDatabases, add_prefix_option

TARGET = 10.0
DEFAULT_BOUND = 16


class SlowAgent:
    """An agent runner whose every turn takes ``turn`` seconds and says nothing."""

    app_name = "bench"

    def __init__(self, turn: float) -> None:
        self.turn = turn

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        await asyncio.sleep(self.turn)
        if False:  # pragma: no cover - an async generator that yields nothing
            yield AgentEvent(author="", invocation_id="")

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        return False


def fill(app: longcall.App, sessions: int, per_session: int) -> int:
    """Completed jobs, ``per_session`` for each session, interleaved; returns how many."""

    @app.long_running
    def export(n: int) -> str:
        """Exports data."""
        return "started"

    n = 0
    for _ in range(per_session):
        for s in range(sessions):
            job_id = export.invoke({"n": n})["jobId"]
            app.attach(job_id, longcall.CallIds("bench", "u", f"s{s}", f"c-{n}", f"inv-{n}"))
            app.complete(job_id, {"n": n})
            n += 1
    return n


def deliveries_per_second(url: str, args: argparse.Namespace, bound: int) -> float:
    """Jobs per second one deliverer loop delivers (and marks) with ``bound`` in flight."""
    with longcall.App(url) as app:
        jobs = fill(app, args.sessions, args.per_session)
        deliverer = app.deliverer(SlowAgent(args.turn), deliveries=bound, poll_interval=0.05)

        async def deliver_all() -> float:
            stop = asyncio.Event()
            started = time.perf_counter()
            loop = asyncio.create_task(deliverer.run(stop))
            while deliverer.stats["delivered"] < jobs:
                if loop.done():
                    loop.result()
                    raise SystemExit("the deliverer loop ended early")
                await asyncio.sleep(0.002)
            elapsed = time.perf_counter() - started
            stop.set()
            deliverer.stop_soon()
            await loop
            return elapsed

        elapsed = asyncio.run(deliver_all())
        delivered = app.store.counts().get(("succeeded", "delivered"), 0)
        if delivered != jobs:
            raise SystemExit(f"{delivered} of {jobs} jobs delivered")
        return jobs / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=2, help="jobs waiting per session")
    parser.add_argument("--turn", type=float, default=0.05, help="agent turn, seconds")
    parser.add_argument("--deliveries", type=int, default=DEFAULT_BOUND, help="the bound")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per figure; medians")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "LONGCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    add_prefix_option(parser)
    args = parser.parse_args()
    databases = None if args.skip_postgres else BenchDatabases(args.pg, args.db_prefix)
    try:
        return run(args, databases)
    finally:
        if databases is not None:
            databases.drop_all()


def run(args: argparse.Namespace, databases: BenchDatabases | None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-"))
    configs: list[tuple[str, Callable[[], str]]] = [
        ("SQLite", lambda: f"sqlite:///{tmp / uuid.uuid4().hex}.db")
    ]
    if databases is not None:
        configs.append(("PostgreSQL", lambda: databases.fresh("deliveries")))
    jobs = args.sessions * args.per_session
    print(
        f"{jobs} jobs over {args.sessions} sessions, agent turns of {args.turn * 1000:.0f} ms,"
        " one worker's deliverer loop"
    )
    bound = args.deliveries
    print(
        f"{'configuration':<14}{'one at a time/s':>16}{f'deliveries={bound} /s':>20}"
        f"{'ratio':>8}  target"
    )
    failed = False
    for name, fresh in configs:
        ones, manys = [], []
        for _ in range(args.rounds):
            ones.append(deliveries_per_second(fresh(), args, 1))
            manys.append(deliveries_per_second(fresh(), args, bound))
        one, many = statistics.median(ones), statistics.median(manys)
        ratio = many / one
        failed |= ratio < TARGET
        mark = "ok" if ratio >= TARGET else "BELOW"
        print(f"{name:<14}{one:>16,.1f}{many:>20,.1f}{ratio:>8.1f}  >= {TARGET:.0f}x {mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
