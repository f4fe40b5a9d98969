"""Child workflows: what a child costs its parent, on SQLite and PostgreSQL.

Run:  pip install -e '.[postgres]' --group bench
      python bench/children.py            (PostgreSQL on 127.0.0.1, and SQLite)
      python bench/children.py --trips 50 --fan-out 200 --pg postgresql://postgres@127.0.0.1/postgres

Two figures per store, one in-process run worker (``app.run_worker()``, its defaults):

(t) round trip: a parent that starts one child (which returns at once) and waits for its
    result, one parent at a time; from ``submit_run`` to the parent's completion as seen by a
    poll every millisecond (median, p99 over ``--trips`` parents), in ms. A parent alone
    (no child) is measured the same way beside it, for the child's share.
(f) fan-out: one parent starting ``--fan-out`` children and waiting for each in turn;
    seconds from submit to the parent's completion, and children per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import longcall
from pg_databases import BenchDatabases, add_prefix_option


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000}


def _until_done(app: longcall.App, run_id: str, seconds: float = 600) -> float:
    deadline = time.monotonic() + seconds
    while app.store.get_run(run_id).status is not longcall.RunStatus.COMPLETED:
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} did not complete: {app.store.get_run(run_id)}")
        time.sleep(0.001)
    return time.perf_counter()


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    app = longcall.App(url)

    @app.workflow
    def leaf(n: int) -> int:
        return n

    @app.workflow
    def alone(n: int) -> int:
        return n

    @app.workflow
    def one(n: int, ctx: longcall.TaskContext) -> int:
        return int(ctx.start_child(leaf, n).result())

    @app.workflow
    def many(n: int, ctx: longcall.TaskContext) -> int:
        handles = [ctx.start_child(leaf, i) for i in range(n)]
        return sum(int(h.result()) for h in handles)

    box: dict[str, Any] = {}
    ready = threading.Event()

    async def serve() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await app.run_worker().run(box["stop"])

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    ready.wait(10)
    try:
        figures: dict[str, Any] = {}
        for name in ("alone", "one"):
            trips = []
            for n in range(args.trips):
                started = time.perf_counter()
                run = app.submit_run(name, n)
                trips.append(_until_done(app, run.run_id) - started)
            figures[f"t {name}"] = _summary(trips)
        started = time.perf_counter()
        run = app.submit_run("many", args.fan_out)
        took = _until_done(app, run.run_id) - started
        figures["f"] = {"seconds": took, "children_per_s": args.fan_out / took}
        return figures
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)
        app.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--trips", type=int, default=50, help="(t) parents, one at a time")
    parser.add_argument("--fan-out", type=int, default=200, help="(f) children of one parent")
    parser.add_argument("--skip-sqlite", action="store_true")
    add_prefix_option(parser)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    databases = BenchDatabases(args.pg, args.db_prefix)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if not args.skip_sqlite:
                results["sqlite"] = measure(f"sqlite:///{tmp}/lc.db", args)
            results["postgres"] = measure(databases.fresh("children"), args)
        finally:
            databases.drop_all()
    print(f"{'':10} {'(t) alone ms med/p99':>22} {'(t) with child ms med/p99':>27} (f) fan-out")
    for name, f in results.items():
        print(
            f"{name:10} {f['t alone']['median_ms']:>10.1f} /{f['t alone']['p99_ms']:>9.1f}"
            f" {f['t one']['median_ms']:>13.1f} /{f['t one']['p99_ms']:>11.1f}"
            f"  {f['f']['children_per_s']:,.0f} children/s ({f['f']['seconds']:.2f} s)"
        )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
