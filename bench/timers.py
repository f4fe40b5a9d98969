"""Durable timers and messages: longcall against DBOS, in the same run.

Run:  pip install -e '.[postgres]' --group bench
      python bench/timers.py                       (PostgreSQL; longcall on SQLite too)
      python bench/timers.py --runs 200 --sleepers 10000 --pg postgresql://postgres@127.0.0.1/postgres

Three figures for each library, on a fresh PostgreSQL database each (and longcall on SQLite):

(f) timer fire latency: ``--runs`` runs started at once, each stamping the time in a step,
    then sleeping ``--seconds``; the latency is from the time due (stamp + seconds) to the
    code after the sleep running (median, p99), in ms. longcall's runs are executed by one
    in-process run worker (``app.run_worker()`` with its defaults); DBOS's by DBOS.
(r) send-to-recv latency: a run parked in ``recv``; from the call that sends the message to
    the code after the recv running (median, p99 over ``--trips`` trips), in ms.
(s) what ``--sleepers`` runs asleep (``sleep(3600)``) cost while they sleep: the process's
    threads and its CPU seconds over 5 s of idling, once all are asleep. DBOS sleeps in a
    thread per workflow (``time.sleep`` after recording the wake-up time), so DBOS's (s) runs
    ``--dbos-sleepers`` workflows (default 1,000) to stay within the machine.

DBOS allows one launched instance per process: DBOS runs in a child process of this one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pg_databases import BenchDatabases, add_prefix_option

Figures = dict[str, Any]


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000}


def _idle_cost(count: Callable[[], int], total: int, deadline: float = 600) -> dict[str, float]:
    """Wait until ``count()`` reaches ``total``, then the threads and CPU over 5 s idle."""
    started = time.monotonic()
    while count() < total:
        if time.monotonic() - started > deadline:
            raise SystemExit(f"only {count()} of {total} runs went to sleep")
        time.sleep(0.2)
    asleep_after = time.monotonic() - started
    cpu = time.process_time()
    time.sleep(5)
    return {
        "sleepers": total,
        "seconds_to_sleep": asleep_after,
        "threads": threading.active_count(),
        "cpu_seconds_idle_5s": time.process_time() - cpu,
    }


# -- longcall ---------------------------------------------------------------------------------


def measure_longcall(url: str, args: argparse.Namespace) -> Figures:
    import longcall

    app = longcall.App(url)
    due: dict[str, float] = {}
    fired: dict[str, float] = {}
    received: dict[str, float] = {}

    @app.task()
    def stamp() -> float:
        return time.time()

    @app.workflow("nap")
    def nap(seconds: float, ctx: longcall.TaskContext) -> None:
        due[ctx.run_id] = stamp() + seconds
        ctx.sleep(seconds)
        fired.setdefault(ctx.run_id, time.time())

    @app.workflow("inbox")
    def inbox(ctx: longcall.TaskContext) -> None:
        ctx.recv("in", timeout=60)
        received.setdefault(ctx.run_id, time.time())

    stop = asyncio.Event()
    loop = asyncio.new_event_loop()
    worker = threading.Thread(target=loop.run_until_complete, args=(app.run_worker().run(stop),))
    worker.start()
    figures: Figures = {}
    try:
        runs = [app.submit_run("nap", args.seconds) for _ in range(args.runs)]
        _wait(lambda: len(fired) == len(runs), 120)
        figures["f"] = _summary([fired[r.run_id] - due[r.run_id] for r in runs])

        latencies = []
        for _ in range(args.trips):
            run = app.submit_run("inbox")
            _wait(lambda r=run: app.store.get_run(r.run_id).recv_topic == "in", 30)
            sent = time.time()
            app.send(run.run_id, "in", {"ok": True})
            _wait(lambda r=run: r.run_id in received, 30)
            latencies.append(received[run.run_id] - sent)
        figures["r"] = _summary(latencies)

        for _ in range(args.sleepers):
            app.submit_run("nap", 3600.0)
        figures["s"] = _idle_cost(
            lambda: app.monitor.run_backlog().counts["sleeping"], args.sleepers
        )
    finally:
        loop.call_soon_threadsafe(stop.set)
        worker.join(60)
        app.close()
    return figures


def _wait(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting")
        time.sleep(0.001)


# -- DBOS (in a child process: one launched DBOS per process) ---------------------------------


def dbos_worker(url: str, args: argparse.Namespace) -> Figures:
    from dbos import DBOS

    DBOS(config={"name": "longcall-timers", "system_database_url": url, "log_level": "WARNING"})
    due: dict[str, float] = {}
    fired: dict[str, float] = {}
    received: dict[str, float] = {}
    asleep = [0]
    lock = threading.Lock()

    @DBOS.step()
    def stamp() -> float:
        return time.time()

    @DBOS.workflow()
    def nap(seconds: float) -> None:
        wid = DBOS.workflow_id
        assert wid is not None
        due[wid] = stamp() + seconds
        if seconds > 60:
            with lock:
                asleep[0] += 1
        DBOS.sleep(seconds)
        fired.setdefault(wid, time.time())

    @DBOS.workflow()
    def inbox() -> None:
        DBOS.recv("in", timeout_seconds=60)
        wid = DBOS.workflow_id
        assert wid is not None
        received.setdefault(wid, time.time())

    DBOS.launch()
    figures: Figures = {}
    try:
        handles = [DBOS.start_workflow(nap, args.seconds) for _ in range(args.runs)]
        for h in handles:
            h.get_result()
        figures["f"] = _summary([fired[h.workflow_id] - due[h.workflow_id] for h in handles])

        latencies = []
        for _ in range(args.trips):
            handle = DBOS.start_workflow(inbox)
            # recv records its timeout as a sleep step once it waits: then it is parked.
            _wait(lambda h=handle: bool(DBOS.list_workflow_steps(h.workflow_id)), 30)
            sent = time.time()
            DBOS.send(handle.workflow_id, {"ok": True}, "in")
            handle.get_result()
            latencies.append(received[handle.workflow_id] - sent)
        figures["r"] = _summary(latencies)

        for _ in range(args.dbos_sleepers):
            DBOS.start_workflow(nap, 3600.0)
        figures["s"] = _idle_cost(lambda: asleep[0], args.dbos_sleepers)
    finally:
        DBOS.destroy(destroy_registry=True, workflow_completion_timeout_sec=0)
    return figures


def measure_dbos(url: str, args: argparse.Namespace, tmp: Path) -> Figures:
    out = tmp / "dbos.json"
    command = [sys.executable, __file__, "--dbos-worker", url, "--out", str(out)]
    for name in ("runs", "seconds", "trips", "dbos_sleepers"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"the DBOS worker failed:\n{done.stdout}{done.stderr}")
    figures: Figures = json.loads(out.read_text())
    return figures


# -- the run ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--runs", type=int, default=200, help="(f) runs sleeping at once")
    parser.add_argument("--seconds", type=float, default=2.0, help="(f) how long each sleeps")
    parser.add_argument("--trips", type=int, default=50, help="(r) send-to-recv trips")
    parser.add_argument("--sleepers", type=int, default=10_000, help="(s) longcall's sleepers")
    parser.add_argument("--dbos-sleepers", type=int, default=1_000, help="(s) DBOS's sleepers")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--dbos-worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    add_prefix_option(parser)
    args = parser.parse_args()
    if args.dbos_worker:
        Path(args.out).write_text(json.dumps(dbos_worker(args.dbos_worker, args)))
        os._exit(0)  # DBOS's sleepers are threads in time.sleep(3600): do not wait for them

    results: dict[str, Figures] = {}
    databases = BenchDatabases(args.pg, args.db_prefix)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if not args.skip_sqlite:
                results["longcall sqlite"] = measure_longcall(f"sqlite:///{tmp}/lc.db", args)
            results["longcall postgres"] = measure_longcall(databases.fresh("longcall"), args)
            results["dbos postgres"] = measure_dbos(databases.fresh("dbos"), args, Path(tmp))
        finally:
            databases.drop_all()
    print(f"{'':20} {'(f) fire ms med/p99':>22} {'(r) send-recv ms med/p99':>26} (s) sleepers")
    for name, f in results.items():
        s = f["s"]
        print(
            f"{name:20} {f['f']['median_ms']:>10.1f} /{f['f']['p99_ms']:>9.1f}"
            f" {f['r']['median_ms']:>12.1f} /{f['r']['p99_ms']:>11.1f}"
            f"  {s['sleepers']:,} asleep: {s['threads']} threads,"
            f" {s['cpu_seconds_idle_5s']:.2f} CPU s in 5 s idle"
        )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
