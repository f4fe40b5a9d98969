"""Named queues with limits: longcall's queue against DBOS's queue, in the same run.

Run:  pip install -e '.[postgres]' --group bench
      python bench/queues.py                       (PostgreSQL; longcall on SQLite too)
      python bench/queues.py --runs 2000 --concurrency 10 --pg postgresql://postgres@127.0.0.1/postgres

Each library gets one queue with every kind of limit: ``--concurrency`` runs at once across
all workers, the same per worker, and a rate limit far above what the queue reaches
(100,000/min: the limiter is checked on every claim but never binds). ``--runs`` workflows of
one step each (the step sleeps ``--work-ms``, a stand-in for I/O) are submitted to the queue
while one worker executes them; the figure is runs per second from the first submit to the
last run completed, and the most steps seen running at once (which must not pass the limit).

- longcall: ``app.queue(...)``; ``app.submit_run(..., queue=)`` from the main thread, one
  in-process run worker (``app.run_worker(concurrency=...)``) in another.
- DBOS: ``DBOS.register_queue(..., global_concurrency=, worker_concurrency=, limiter=)``;
  ``queue.enqueue`` from the main thread; DBOS's own queue thread dequeues. DBOS polls its
  queues, once a second by default: this run passes ``--dbos-poll`` (default 0.05 s, 20x
  more often than DBOS's default, in DBOS's favour). DBOS allows one launched instance per
  process: it runs in a child process of this one, on its own fresh database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pg_databases import BenchDatabases, add_prefix_option

Figures = dict[str, Any]
RATE_LIMIT = 100_000  # per minute: checked on every claim, never reached


class Gauge:
    """The steps running now, and the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def work(self, seconds: float) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(seconds)
        with self.lock:
            self.now -= 1


def measure_longcall(url: str, args: argparse.Namespace) -> Figures:
    import longcall

    app = longcall.App(url)
    gauge = Gauge()
    app.queue(
        "bench",
        concurrency=args.concurrency,
        worker_concurrency=args.concurrency,
        rate=f"{RATE_LIMIT}/min",
    )

    @app.task()
    def work(i: int) -> int:
        gauge.work(args.work_ms / 1000)
        return i

    @app.workflow("one")
    def one(i: int) -> int:
        return work(i)

    box: dict[str, Any] = {}
    ready = threading.Event()

    def serve() -> None:
        async def main() -> None:
            box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
            ready.set()
            await app.run_worker(concurrency=args.concurrency).run(box["stop"])

        asyncio.run(main())

    thread = threading.Thread(target=serve, name="worker")
    thread.start()
    try:
        ready.wait(10)
        time.sleep(0.5)  # the worker is up (and, on PostgreSQL, listening)
        started = time.perf_counter()
        for i in range(args.runs):
            app.submit_run("one", i, queue="bench")
        while True:
            (stats,) = app.queue_stats()
            if not stats.counts:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join()
        app.close()
    return {"runs_per_s": args.runs / elapsed, "seconds": elapsed, "most_at_once": gauge.most}


def dbos_worker(url: str, args: argparse.Namespace) -> Figures:
    from dbos import DBOS

    DBOS(config={"name": "longcall-queues", "system_database_url": url, "log_level": "WARNING"})
    gauge = Gauge()

    @DBOS.step()
    def work(i: int) -> int:
        gauge.work(args.work_ms / 1000)
        return i

    @DBOS.workflow(name="one")
    def one(i: int) -> int:
        return work(i)

    DBOS.launch()
    queue = DBOS.register_queue(
        "bench",
        global_concurrency=args.concurrency,
        worker_concurrency=args.concurrency,
        limiter={"limit": RATE_LIMIT, "period": 60},
        polling_interval_sec=args.dbos_poll,
    )
    try:
        time.sleep(1.5)  # DBOS's queue thread looks for new queues once a second
        started = time.perf_counter()
        handles = [queue.enqueue(one, i) for i in range(args.runs)]
        for handle in handles:
            handle.get_result()
        elapsed = time.perf_counter() - started
    finally:
        DBOS.destroy(destroy_registry=True, workflow_completion_timeout_sec=0)
    return {"runs_per_s": args.runs / elapsed, "seconds": elapsed, "most_at_once": gauge.most}


def measure_dbos(url: str, args: argparse.Namespace, tmp: Path) -> Figures:
    out = tmp / "dbos.json"
    command = [sys.executable, __file__, "--dbos-worker", url, "--out", str(out)]
    for name in ("runs", "concurrency", "work_ms", "dbos_poll"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"the DBOS worker failed:\n{done.stdout}{done.stderr}")
    figures: Figures = json.loads(out.read_text())
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10, help="the queue's limits")
    parser.add_argument("--work-ms", type=float, default=5.0, help="each step's sleep")
    parser.add_argument("--dbos-poll", type=float, default=0.05, help="DBOS's queue polling")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--dbos-worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    add_prefix_option(parser)
    args = parser.parse_args()
    if args.dbos_worker:
        Path(args.out).write_text(json.dumps(dbos_worker(args.dbos_worker, args)))
        os._exit(0)

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
    print(
        f"{args.runs} runs, queue concurrency {args.concurrency} (per worker too), "
        f"rate {RATE_LIMIT}/min, {args.work_ms:g} ms of work each"
    )
    for name, f in results.items():
        print(
            f"{name:20} {f['runs_per_s']:>8.1f} runs/s  ({f['seconds']:.2f} s,"
            f" at most {f['most_at_once']} at once)"
        )
    ratio = results["longcall postgres"]["runs_per_s"] / results["dbos postgres"]["runs_per_s"]
    print(f"longcall postgres / dbos postgres: {ratio:.2f}x")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
