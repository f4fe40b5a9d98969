"""longcall's durable workflows against LangGraph's functional API and DBOS.

Run:  pip install -e '.[postgres]' --group bench
      python bench/workflows.py                    (SQLite and PostgreSQL, 5 rounds)
      python bench/workflows.py --skip-postgres --rounds 3
      python bench/workflows.py --pg postgresql://postgres@127.0.0.1:5432/postgres
      python bench/workflows.py --peers-only        (LangGraph and DBOS alone)

One run measures, on the same machine, longcall (SQLite and PostgreSQL), LangGraph's
functional API with its SqliteSaver on a file, and DBOS (SQLite and PostgreSQL), each at its
default durable setting (longcall: WAL with synchronous=FULL, every task's result committed
before the task call returns on SQLite, and on PostgreSQL before the next task call starts, the
last one with the run's end, within 20 ms either way; LangGraph: durability="async"; DBOS: its
default SQLite journal and synchronous, every step recorded before the next one starts):

(a) one workflow of 200 sequential tasks that return small dicts: tasks/s;
(b) 300 runs of a workflow that calls one task, one after another: runs/s;
(c) interrupt then resume, median round trip in ms. What is timed, the same for each:
    from the call that starts a new run, which runs until the workflow is suspended
    waiting for input, through the call that hands it the answer, to the run's result.
      longcall   app.run_workflow("approve", 1) (status waiting_input) then
                 app.answer(run_id, {...}) (status completed);
      LangGraph  approve.invoke(1, config) (returns the __interrupt__) then
                 approve.invoke(Command(resume={...}), config);
      DBOS       DBOS.start_workflow(approve, 1), waiting until the workflow is parked in
                 DBOS.recv (its timeout step is in DBOS.list_workflow_steps), DBOS.send(...)
                 and handle.get_result(). DBOS's recv wakes through LISTEN/NOTIFY on
                 PostgreSQL, but on SQLite through a poller that runs once a second by
                 default (a parked round trip then takes ~1 s), so DBOS's (c) on SQLite runs
                 in its own process with notification_listener_polling_interval_sec=0.001.

Each round runs every library once with a fresh database (a new file in a temp directory,
or a new PostgreSQL database); the figures are the medians over the rounds. LangGraph and
longcall run in this process; DBOS allows one launched instance per process, so each DBOS
configuration runs in a child process of this one (``--dbos-worker``), started once per round.
Every workload warms up untimed first.

Targets (issue): longcall at least 2x LangGraph's tasks/s and 3x DBOS's steps/s on each
store in (a), and at most half of LangGraph's round trip in (c). (b) and DBOS's (c) print
their ratios without a target. The exit code is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pg_databases import BenchDatabases, add_prefix_option

INSTALL = "pip install -e '.[postgres]' --group bench"


@dataclass(frozen=True)
class Sizes:
    tasks: int = 200  # (a) tasks in the one workflow
    runs: int = 300  # (b) one-task runs
    trips: int = 50  # (c) interrupt/resume round trips per round (their median)
    warmup: int = 5


Figures = dict[str, float]  # {"a": tasks/s, "b": runs/s, "c": round-trip ms}


def _rate(count: int, work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    return count / (time.perf_counter() - started)


def _scenarios(
    sizes: Sizes,
    scenarios: str,
    run_chain: Callable[[int], None],
    run_ones: Callable[[int], None],
    trip: Callable[[], None],
) -> Figures:
    """The same three measurements, each after a warm-up, whichever library is behind them."""
    figures: Figures = {}
    if "a" in scenarios:
        run_chain(sizes.warmup)
        figures["a"] = _rate(sizes.tasks, lambda: run_chain(sizes.tasks))
    if "b" in scenarios:
        run_ones(sizes.warmup)
        figures["b"] = _rate(sizes.runs, lambda: run_ones(sizes.runs))
    if "c" in scenarios:
        for _ in range(sizes.warmup):
            trip()
        figures["c"] = _median_ms(sizes.trips, trip)
    return figures


def _median_ms(count: int, trip: Callable[[], None]) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        trip()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


# -- longcall -------------------------------------------------------------------------


def longcall_available() -> bool:
    try:
        import longcall
    except ImportError:
        return False
    return hasattr(longcall, "App") and hasattr(longcall.App, "run_workflow")


def measure_longcall(url: str, sizes: Sizes, scenarios: str) -> Figures:
    """The three workloads through longcall's public workflow API on one fresh database."""
    import pydantic

    import longcall

    app = longcall.App(url)

    @app.task()
    def step(i: int) -> dict[str, Any]:
        return {"i": i, "ok": True}

    @app.workflow("chain")
    def chain(n: int) -> int:
        for i in range(n):
            step(i)
        return n

    @app.workflow("one")
    def one(i: int) -> dict[str, Any]:
        return step(i)

    class Approval(pydantic.BaseModel):
        approved: bool

    @app.workflow("approve")
    def approve(x: int, ctx: longcall.TaskContext) -> bool:
        answer = ctx.interrupt("approve?", schema=Approval)
        return answer.approved

    def run_chain(n: int) -> None:
        run = app.run_workflow("chain", n)
        assert run.status == "completed" and run.result == n, (run.status, run.result)

    def run_ones(count: int) -> None:
        for i in range(count):
            run = app.run_workflow("one", i)
            assert run.status == "completed", run.status

    def trip() -> None:
        run = app.run_workflow("approve", 1)
        assert run.status == "waiting_input", run.status
        done = app.answer(run.run_id, {"interrupt-1": {"approved": True}})
        assert done.status == "completed" and done.result is True, (done.status, done.result)

    try:
        return _scenarios(sizes, scenarios, run_chain, run_ones, trip)
    finally:
        app.close()


# -- LangGraph ------------------------------------------------------------------------


def measure_langgraph(path: Path, sizes: Sizes, scenarios: str) -> Figures:
    """The three workloads through LangGraph's functional API with SqliteSaver on ``path``."""
    import sqlite3

    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.func import entrypoint, task
        from langgraph.types import Command, interrupt
    except ImportError as exc:
        raise SystemExit(f"LangGraph is not installed ({exc}): {INSTALL}") from exc

    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()

    @task
    def step(i: int) -> dict[str, Any]:
        return {"i": i, "ok": True}

    @entrypoint(checkpointer=saver)
    def chain(n: int) -> int:
        for i in range(n):
            step(i).result()
        return n

    @entrypoint(checkpointer=saver)
    def one(i: int) -> dict[str, Any]:
        return step(i).result()

    @entrypoint(checkpointer=saver)
    def approve(x: int) -> bool:
        answer = interrupt("approve?")
        return bool(answer["approved"])

    def thread() -> dict[str, Any]:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    def run_chain(n: int) -> None:
        assert chain.invoke(n, thread()) == n

    def run_ones(count: int) -> None:
        for i in range(count):
            assert one.invoke(i, thread()) == {"i": i, "ok": True}

    def trip() -> None:
        config = thread()
        suspended = approve.invoke(1, config)
        assert "__interrupt__" in suspended, suspended
        assert approve.invoke(Command(resume={"approved": True}), config) is True

    try:
        return _scenarios(sizes, scenarios, run_chain, run_ones, trip)
    finally:
        conn.close()


# -- DBOS (in a child process: one launched DBOS per process) -------------------------


def dbos_worker(url: str, sizes: Sizes, scenarios: str, poll: float | None) -> Figures:
    """The three workloads through DBOS on ``url``; runs once per process."""
    try:
        from dbos import DBOS
    except ImportError as exc:
        raise SystemExit(f"DBOS is not installed ({exc}): {INSTALL}") from exc

    config: dict[str, Any] = {
        "name": "longcall-bench",
        "system_database_url": url,
        "log_level": "WARNING",
    }
    if poll is not None:
        config["notification_listener_polling_interval_sec"] = poll
    DBOS(config=config)
    parked = threading.Event()

    @DBOS.step()
    def step(i: int) -> dict[str, Any]:
        return {"i": i, "ok": True}

    @DBOS.workflow()
    def chain(n: int) -> int:
        for i in range(n):
            step(i)
        return n

    @DBOS.workflow()
    def one(i: int) -> dict[str, Any]:
        return step(i)

    @DBOS.workflow()
    def approve(x: int) -> bool:
        parked.set()  # about to wait; the harness then waits for the durable timeout step
        answer = DBOS.recv("approval", timeout_seconds=60)
        return bool(answer["approved"])

    DBOS.launch()

    def run_chain(n: int) -> None:
        assert chain(n) == n

    def run_ones(count: int) -> None:
        for i in range(count):
            assert one(i) == {"i": i, "ok": True}

    def trip() -> None:
        parked.clear()
        handle = DBOS.start_workflow(approve, 1)
        parked.wait(10)
        # recv records its timeout as a DBOS.sleep step once it has checked for a message
        # and registered to be woken: from then on the run is suspended, waiting for input.
        while not DBOS.list_workflow_steps(handle.workflow_id):
            time.sleep(0.0002)
        DBOS.send(handle.workflow_id, {"approved": True}, "approval")
        assert handle.get_result() is True

    try:
        return _scenarios(sizes, scenarios, run_chain, run_ones, trip)
    finally:
        DBOS.destroy()


def measure_dbos(
    url: str, sizes: Sizes, scenarios: str, tmp: Path, poll: float | None = None
) -> Figures:
    """Run :func:`dbos_worker` in a child process and collect its figures."""
    out = tmp / f"dbos-{uuid.uuid4().hex}.json"
    command = [
        sys.executable,
        __file__,
        "--dbos-worker",
        url,
        "--out",
        str(out),
        "--scenarios",
        scenarios,
        "--sizes",
        json.dumps(asdict(sizes)),
    ]
    if poll is not None:
        command += ["--poll", str(poll)]
    done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the DBOS worker on {url} failed:\n{done.stdout}{done.stderr}")
    figures: Figures = json.loads(out.read_text())
    return figures


# -- the run --------------------------------------------------------------------------


SCENARIOS = {
    "a": (f"(a) {Sizes.tasks} sequential tasks", "tasks/s", ",.0f"),
    "b": (f"(b) {Sizes.runs} one-task runs", "runs/s", ",.0f"),
    "c": ("(c) interrupt + resume", "ms", ".2f"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the figures are medians")
    parser.add_argument("--trips", type=int, default=Sizes.trips, help="(c) round trips a round")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "LONGCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="an admin URL; the benchmark creates and drops its own databases beside it",
    )
    parser.add_argument("--skip-postgres", action="store_true")
    add_prefix_option(parser)
    parser.add_argument("--peers-only", action="store_true", help="measure LangGraph and DBOS")
    parser.add_argument("--dbos-worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios", default="abc", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    parser.add_argument("--poll", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.dbos_worker:
        sizes = Sizes(**json.loads(args.sizes)) if args.sizes else Sizes()
        figures = dbos_worker(args.dbos_worker, sizes, args.scenarios, args.poll)
        Path(args.out).write_text(json.dumps(figures))
        return 0

    sizes = Sizes(trips=args.trips)
    with_longcall = not args.peers_only
    if with_longcall and not longcall_available():
        print("longcall has no workflows yet (App.run_workflow): measuring the peers only\n")
        with_longcall = False
    postgres = not args.skip_postgres
    databases = BenchDatabases(args.pg, args.db_prefix) if postgres else None

    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-wf-"))
    # (library, store) -> how to measure one round on a fresh database.
    subjects: dict[tuple[str, str], Callable[[], Figures]] = {}
    if with_longcall:
        subjects["longcall", "SQLite"] = lambda: measure_longcall(
            f"sqlite:///{tmp / (uuid.uuid4().hex + '.db')}", sizes, "abc"
        )
        if postgres:
            subjects["longcall", "PostgreSQL"] = lambda: measure_longcall(
                databases.fresh("longcall"), sizes, "abc"
            )
    subjects["LangGraph", "SQLite"] = lambda: measure_langgraph(
        tmp / f"{uuid.uuid4().hex}.db", sizes, "abc"
    )

    def dbos_sqlite() -> Figures:
        figures = measure_dbos(f"sqlite:///{tmp / (uuid.uuid4().hex + '.db')}", sizes, "ab", tmp)
        figures |= measure_dbos(
            f"sqlite:///{tmp / (uuid.uuid4().hex + '.db')}", sizes, "c", tmp, poll=0.001
        )
        return figures

    subjects["DBOS", "SQLite"] = dbos_sqlite
    if postgres:
        subjects["DBOS", "PostgreSQL"] = lambda: measure_dbos(
            databases.fresh("dbos"), sizes, "abc", tmp
        )

    samples: dict[tuple[str, str], list[Figures]] = {key: [] for key in subjects}
    try:
        for round_no in range(args.rounds):
            for key, measure in subjects.items():
                samples[key].append(measure())
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if databases is not None:
            databases.drop_all()

    median: dict[tuple[str, str], Figures] = {
        key: {s: statistics.median(f[s] for f in got) for s in got[0]}
        for key, got in samples.items()
    }

    print(f"{'scenario':<28}{'library':<11}{'store':<12}{'median':>10}  unit     rounds")
    for s, (title, unit, fmt) in SCENARIOS.items():
        for (library, store), figures in median.items():
            rounds = " ".join(format(f[s], fmt) for f in samples[library, store])
            print(
                f"{title:<28}{library:<11}{store:<12}{format(figures[s], fmt):>10}  "
                f"{unit:<8} {rounds}"
            )
    if not with_longcall:
        return 0

    # (label, ratio, target, whether higher is better); target None: printed, not judged.
    ratios: list[tuple[str, float, float | None, bool]] = []
    ours = median["longcall", "SQLite"]
    lg = median["LangGraph", "SQLite"]
    ratios.append(("(a) tasks/s   longcall / LangGraph, SQLite", ours["a"] / lg["a"], 2, True))
    stores = ["SQLite", "PostgreSQL"] if postgres else ["SQLite"]
    for store in stores:
        ratio = median["longcall", store]["a"] / median["DBOS", store]["a"]
        ratios.append((f"(a) tasks/s   longcall / DBOS, {store}", ratio, 3, True))
    ratios.append(("(b) runs/s    longcall / LangGraph, SQLite", ours["b"] / lg["b"], None, True))
    for store in stores:
        ratio = median["longcall", store]["b"] / median["DBOS", store]["b"]
        ratios.append((f"(b) runs/s    longcall / DBOS, {store}", ratio, None, True))
    ratios.append(("(c) ms        longcall / LangGraph, SQLite", ours["c"] / lg["c"], 0.5, False))
    for store in stores:
        ratio = median["longcall", store]["c"] / median["DBOS", store]["c"]
        ratios.append((f"(c) ms        longcall / DBOS, {store}", ratio, None, False))

    print(f"\n{'ratio':<48}{'measured':>9}  target")
    failed = False
    for label, ratio, target, higher in ratios:
        if target is None:
            print(f"{label:<48}{ratio:>8.2f}x  (none)")
            continue
        ok = ratio >= target if higher else ratio <= target
        failed |= not ok
        sign = ">=" if higher else "<="
        print(f"{label:<48}{ratio:>8.2f}x  {sign} {target:<4} {'PASS' if ok else 'MISS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
