"""A worker process for the timer and message tests: it executes ``napper`` and ``relay``
runs until it is killed. ``relay`` publishes ``stage``, waits for a message on ``in``, and
publishes it back as ``out`` with its pid.

Run by path: ``python tests/workflows/timer_procs.py --url URL --effects FILE``. ``napper``
logs ``before <pid> <time>``, sleeps ``seconds`` (its input) with ``ctx.sleep``, then logs
``after <pid> <time>`` (one ``write`` each, ``O_APPEND``) and returns the time it woke.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from longcall import App
from longcall.workflows import TaskContext


def build_app(url: str, effects: Path) -> App:
    app = App(url, run_lease="1s")

    @app.task
    def log(what: str) -> float:
        now = time.time()
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{what} {os.getpid()} {now!r}\n".encode())
        finally:
            os.close(fd)
        return now

    @app.workflow
    def napper(seconds: float, ctx: TaskContext) -> float:
        log("before")
        ctx.sleep(seconds)
        return log("after")

    @app.workflow
    def relay(ctx: TaskContext) -> str:
        ctx.set_event("stage", "waiting")
        message = ctx.recv("in")
        ctx.set_event("out", {"echo": message, "pid": os.getpid()})
        return "relayed"

    return app


def read_effects(path: Path) -> list[tuple[str, int, float]]:
    if not path.exists():
        return []
    lines = (line.split() for line in path.read_text().splitlines() if line)
    return [(what, int(pid), float(at)) for what, pid, at in lines]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--effects", type=Path, required=True)
    args = parser.parse_args()
    with build_app(args.url, args.effects) as app:
        print("ready", flush=True)
        # The default poll interval (1s): what a restarted worker's wake-up tolerance is.
        asyncio.run(app.run_worker(concurrency=4).run(asyncio.Event()))


if __name__ == "__main__":
    sys.exit(main())
