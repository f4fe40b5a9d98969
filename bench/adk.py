"""What longcall adds to a google-adk turn, and how fast a completion reaches the agent.

Run:  python bench/adk.py          (200 turns and 100 resumes on in-memory, then SQLite,
                                     ADK sessions; longcall's store is SQLite, FULL)
      python bench/adk.py --turns 500 --resumes 200 --sessions database
      python bench/adk.py --synchronous NORMAL

It prints each figure beside its target and exits 1 when a target is missed.

Needs google-adk (``pip install 'longcall[adk]'``); no network, no API key: the model is
longcall's offline ``ScriptedLlm``, so an ADK turn costs what ADK itself costs and longcall's
share shows instead of drowning in model latency.

1. Turn overhead. One turn = the user asks for an export, the model calls a long-running tool,
   the tool answers pending, the model says so. The same function runs as longcall's tool
   (a job row created with the whole join, the session lease taken and released by
   ``LongcallPlugin``) and as a plain ``google.adk`` ``LongRunningFunctionTool`` with no
   plugin, on the same kind of ADK session service, alternating turn by turn in the same run;
   each turn on a fresh session. Target: the median longcall turn at most 15% slower on
   in-memory ADK sessions, 10% on SQLite (or database) ones. With ``synchronous=FULL`` a
   turn makes one fsync (the job row); the lease and dispatch bookkeeping commit without.
2. Completion to resumed run. A worker (resumer, sweeper, dispatcher) runs with
   ``AdkAgentRunner`` in the same event loop, its poll interval set to 10 s so only the
   store's in-process ready listener can wake it in time. The clock starts before
   ``app.complete_async()`` and stops at the first event of the resumed ADK run. Target:
   median under 20 ms. On SQLite (WAL, ``synchronous=FULL`` unless told otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import longcall

try:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App as AdkApp
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.sessions.base_session_service import BaseSessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.adk.tools.long_running_tool import LongRunningFunctionTool
    from google.genai import types

    from longcall.adk import AdkAgentRunner, LongcallPlugin, ScriptedLlm, long_running_tool
except ImportError:  # pragma: no cover - depends on the installed extras
    sys.exit("bench/adk.py needs google-adk: pip install 'longcall[adk]'")

# At most this much added to a turn, by ADK session service: an in-memory turn costs ADK
# little, so the same absolute cost weighs more there.
TURN_TARGET = {"memory": 0.15, "sqlite": 0.10, "database": 0.10}
RESUME_TARGET = 0.020  # under 20 ms from completion to the resumed run
USER = "u"


def export_data(export_type: str) -> dict[str, str]:
    """Exports the user's data as a file; the link arrives later."""
    return {"status": "pending", "message": f"Exporting {export_type} data."}


RULES = [
    longcall.Rule(
        r"export my data to (csv|json)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    )
]
MESSAGE = types.Content(role="user", parts=[types.Part(text="Export my data to CSV")])


def sessions_of(kind: str, directory: Path, name: str) -> BaseSessionService:
    if kind == "memory":
        return InMemorySessionService()
    if kind == "sqlite":
        return SqliteSessionService(str(directory / f"{name}-sessions.db"))
    from google.adk.sessions import DatabaseSessionService

    return DatabaseSessionService(f"sqlite+aiosqlite:///{directory / f'{name}-sessions-sa.db'}")


class Setup:
    """An ADK app name, its Runner and its session service."""

    def __init__(
        self,
        name: str,
        runner: Runner,
        sessions: BaseSessionService,
        plugin: LongcallPlugin | None = None,
    ) -> None:
        self.name, self.runner, self.sessions, self.plugin = name, runner, sessions, plugin
        self.count = 0

    async def new_session(self) -> str:
        self.count += 1
        session_id = f"{self.name}-{self.count}"
        await self.sessions.create_session(app_name=self.name, user_id=USER, session_id=session_id)
        return session_id

    async def turn(self, session_id: str) -> list[Any]:
        return [
            e
            async for e in self.runner.run_async(
                user_id=USER, session_id=session_id, new_message=MESSAGE
            )
        ]

    async def close(self) -> None:
        await self.runner.close()
        closing = getattr(self.sessions, "close", None)
        if closing is not None:
            result = closing()
            if asyncio.iscoroutine(result):
                await result


def longcall_setup(app: longcall.App, kind: str, directory: Path, part: str) -> Setup:
    sessions = sessions_of(kind, directory, f"longcall-{part}")
    tool = long_running_tool(app, export_data, key="export:{session_id}:{export_type}")
    plugin = LongcallPlugin(app)
    runner = Runner(
        app=AdkApp(
            name="longcall",
            root_agent=LlmAgent(name="exporter", model=ScriptedLlm(rules=RULES), tools=[tool]),
            plugins=[plugin],
        ),
        session_service=sessions,
    )
    return Setup("longcall", runner, sessions, plugin)


def plain_setup(kind: str, directory: Path) -> Setup:
    sessions = sessions_of(kind, directory, "plain")
    runner = Runner(
        app=AdkApp(
            name="plain",
            root_agent=LlmAgent(
                name="exporter",
                model=ScriptedLlm(rules=RULES),
                tools=[LongRunningFunctionTool(export_data)],
            ),
        ),
        session_service=sessions,
    )
    return Setup("plain", runner, sessions)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


class StoreMeter:
    """What a turn asks of longcall's store: calls, time in them, commits and fsyncs.

    Counted from whichever thread makes the call, under a lock; a turn's figures are read
    after the plugin's lease release (which the run does not wait for) has committed, so
    every call lands in the turn that made it.
    """

    METHODS = (
        "take_session",
        "release_session",
        "renew_session",
        "create_job",
        "finish_dispatch",
        "abandon_job",
        "attach",
    )

    def __init__(self, app: longcall.App) -> None:
        self.store = app.store
        self.lock = threading.Lock()
        self.spent, self.calls, self.commits, self.fsyncs = 0.0, 0, 0, 0
        for name in self.METHODS:
            setattr(self.store, name, self._timed(getattr(self.store, name)))
        run_group = self.store._run_group

        def counted(conn: Any, tx: Any, batch: list[Any]) -> None:
            run_group(conn, tx, batch)
            with self.lock:
                self.commits += 1
                durable = any(item.durable for item in batch)
                self.fsyncs += durable and self.store.synchronous == "FULL"

        self.store._run_group = counted

    def _timed(self, method: Any) -> Any:
        def timed(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*a, **k)
            finally:
                with self.lock:
                    self.spent += time.perf_counter() - start
                    self.calls += 1

        return timed

    def snapshot(self) -> tuple[float, int, int, int]:
        with self.lock:
            return self.spent, self.calls, self.commits, self.fsyncs


async def turn_overhead(args: argparse.Namespace, kind: str, directory: Path) -> bool:
    app = longcall.App(f"sqlite:///{directory / f'turns-{kind}.db'}?synchronous={args.synchronous}")
    with_longcall = longcall_setup(app, kind, directory, "turns")
    plain = plain_setup(kind, directory)
    meter = StoreMeter(app)
    measured = [0.0, 0, 0, 0]  # time in the store, calls, commits, fsyncs
    times: dict[str, list[float]] = {"longcall": [], "plain": []}
    try:
        for i in range(args.warmup + args.turns):
            # Alternate which goes first, so neither always runs on a warmer cache.
            order = (with_longcall, plain) if i % 2 == 0 else (plain, with_longcall)
            for setup in order:
                session_id = await setup.new_session()
                before = meter.snapshot()
                start = time.perf_counter()
                events = await setup.turn(session_id)
                elapsed = time.perf_counter() - start
                if setup.plugin is not None:
                    await setup.plugin.settled()  # its release belongs to this turn
                if i >= args.warmup and setup is with_longcall:
                    after = meter.snapshot()
                    for n in range(4):
                        measured[n] += after[n] - before[n]
                assert len(events) == 3, events  # call, pending response, the model's reply
                if i >= args.warmup:
                    times[setup.name].append(elapsed)
        jobs = await app.list_jobs_async(limit=args.warmup + args.turns + 1)
        assert len(jobs) == args.warmup + args.turns
        assert all(j.call_id and j.session_id for j in jobs)
    finally:
        await with_longcall.close()
        await plain.close()
        app.close()
    base = statistics.median(times["plain"])
    ours = statistics.median(times["longcall"])
    added = ours / base - 1
    target = TURN_TARGET[kind]
    ok = added <= target
    print(f"ADK turn with a long-running tool, {kind} ADK sessions, {args.turns} turns each")
    print(f"  plain google.adk LongRunningFunctionTool, no plugin  median {ms(base)}")
    print(f"  longcall tool (job row) + LongcallPlugin (lease)     median {ms(ours)}")
    print(
        f"  added by longcall: {ms(ours - base)} = {added:+.1%}"
        f"   target <= {target:.0%}: {'met' if ok else 'MISSED'}"
    )
    print(
        f"  of which inside longcall's store (SQLite synchronous={args.synchronous}): "
        f"{ms(measured[0] / args.turns)} per turn in {measured[1] / args.turns:.1f} calls, "
        f"{measured[2] / args.turns:.1f} commits, {measured[3] / args.turns:.1f} with fsync"
    )
    return ok


async def delivered(app: longcall.App, job_id: str) -> None:
    """Wait until the resumer has marked the job delivered (so runs never overlap)."""
    for _ in range(30_000):
        if (await app.get_job_async(job_id)).delivery is longcall.Delivery.DELIVERED:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"job {job_id} was not marked delivered")


async def completion_to_resume(args: argparse.Namespace, kind: str, directory: Path) -> bool:
    url = f"sqlite:///{directory / f'resumes-{kind}.db'}?synchronous={args.synchronous}"
    app = longcall.App(url)
    first_event: dict[str, asyncio.Future[float]] = {}

    def on_event(job: longcall.Job, event: Any) -> None:
        future = first_event.get(job.job_id)
        if future is not None and not future.done():
            future.set_result(time.perf_counter())

    setup = longcall_setup(app, kind, directory, "resumes")
    worker = app.worker(
        AdkAgentRunner(setup.runner),
        poll_interval="10s",
        sweep_interval="10s",
        dispatch_interval="10s",
        on_event=on_event,
    )
    running = asyncio.create_task(worker.run(handle_signals=False))
    latencies: list[float] = []
    try:
        await asyncio.sleep(0.05)  # the worker is waiting for work
        for i in range(args.warmup + args.resumes):
            session_id = await setup.new_session()
            await setup.turn(session_id)
            job_id = longcall.job_id_for(f"export:{session_id}:csv", USER)
            first_event[job_id] = asyncio.get_running_loop().create_future()
            start = time.perf_counter()
            await app.complete_async(job_id, {"url": f"https://example.com/{i}.csv"})
            reached = await asyncio.wait_for(first_event[job_id], 30)
            if i >= args.warmup:
                latencies.append(reached - start)
            await delivered(app, job_id)
        stats = dict(worker.deliverer.stats)
    finally:
        worker.stop()
        await running
        await setup.close()
        app.close()
    assert stats == {"delivered": args.warmup + args.resumes}, stats
    median = statistics.median(latencies)
    p90 = statistics.quantiles(latencies, n=10)[-1]
    ok = median < RESUME_TARGET
    print(
        f"app.complete_async() -> first event of the resumed ADK run, {args.resumes} resumes, "
        f"SQLite synchronous={args.synchronous}, {kind} ADK sessions"
    )
    print(
        f"  median {ms(median)}  p90 {ms(p90)}  min {ms(min(latencies))}"
        f"   target < {ms(RESUME_TARGET)}: {'met' if ok else 'MISSED'}"
    )
    return ok


async def run(args: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory(prefix="longcall-bench-adk-") as tmp:
        directory = Path(tmp)
        ok = True
        for kind in args.sessions.split(","):
            print()
            ok = await turn_overhead(args, kind, directory) and ok
            print()
            ok = await completion_to_resume(args, kind, directory) and ok
        return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per side")
    parser.add_argument("--resumes", type=int, default=100, help="measured resumes")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured first rounds")
    parser.add_argument(
        "--sessions",
        default="memory,sqlite",
        help="ADK session services to measure on, comma-separated, of memory, sqlite and "
        "database (DatabaseSessionService on aiosqlite); both sides use the same",
    )
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    args = parser.parse_args()
    unknown = set(args.sessions.split(",")) - {"memory", "sqlite", "database"}
    if unknown:
        parser.error(f"unknown session services: {sorted(unknown)}")
    warnings.simplefilter("ignore")  # ADK's experimental-feature notices
    logging.basicConfig(level=logging.WARNING)
    print(f"python {sys.version.split()[0]}, google-adk {_adk_version()}, longcall SQLite store")
    return 0 if asyncio.run(run(args)) else 1


def _adk_version() -> str:
    from importlib.metadata import version

    return version("google-adk")


if __name__ == "__main__":
    sys.exit(main())
