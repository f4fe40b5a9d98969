"""A background-run worker of named queues in its own process, for the queue limit tests.

Run by path: ``python tests/workflows/queue_procs.py --url URL --effects FILE``. It builds the
App of :func:`build_app` and runs a RunWorker (``--concurrency`` slots, every queue) until
SIGTERM. The task ``hold`` appends ``<run_id> start|end <pid> <monotonic time>`` to
``--effects`` as it begins and ends (one ``O_APPEND`` write each): CLOCK_MONOTONIC is one
clock for every process of the machine, so the test can count the tasks running at once.

Queues: ``limited`` (concurrency 5, worker_concurrency 2) and ``rated`` (rate 4/1s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from longcall import App
from longcall.workflows import TaskContext

RATE = (4, 1.0)  # the rated queue's runs per period


def log(path: Path | None, run_id: str, what: str) -> None:
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {what} {os.getpid()} {time.monotonic():.6f}\n".encode())
    finally:
        os.close(fd)


def read_spans(*paths: Path) -> dict[str, tuple[int, float, float]]:
    """Each run's (pid, start, end) from the effects files."""
    starts: dict[str, tuple[int, float]] = {}
    spans: dict[str, tuple[int, float, float]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            run_id, what, pid, at = line.split()
            if what == "start":
                starts[run_id] = (int(pid), float(at))
            else:
                spans[run_id] = (int(pid), starts[run_id][1], float(at))
    return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same time)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def build_app(url: str, effects: Path | None = None) -> App:
    app = App(url, run_lease="5s")
    app.queue("limited", concurrency=5, worker_concurrency=2)
    app.queue("rated", rate=f"{RATE[0]}/{RATE[1]:g}s")

    @app.task(name="hold")
    def hold(seconds: float, ctx: TaskContext) -> None:
        log(effects, ctx.run_id, "start")
        time.sleep(seconds)
        log(effects, ctx.run_id, "end")

    @app.workflow("held")
    def held(seconds: float) -> None:
        hold(seconds)

    return app


async def serve(app: App, concurrency: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await app.run_worker(concurrency=concurrency, poll_interval="50ms", grace="1s").run(stop)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    app = build_app(args.url, args.effects)
    try:
        asyncio.run(serve(app, args.concurrency))
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
