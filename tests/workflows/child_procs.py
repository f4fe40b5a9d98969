"""A worker process for the child-workflow tests: it executes ``mom`` and ``kid`` runs until
it is killed. ``mom`` starts a ``kid`` and returns what it returned; ``kid`` logs
``kid <pid> <time>``, works ``seconds`` (its input) in a task, and returns its pid. ``boss``
starts a ``ticker``, which logs ``tick`` and then calls a 50 ms task ``ticks`` times.

Run by path: ``python tests/workflows/child_procs.py --url URL --effects FILE [--crash]``.
With ``--crash`` the process SIGKILLs itself right after the store has created a child run,
before the parent has recorded that it did: the window a replay must not start a second
child in.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

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

    @app.task
    def work(seconds: float) -> int:
        time.sleep(seconds)
        return os.getpid()

    @app.workflow
    def kid(seconds: float) -> int:
        log("kid")
        return work(seconds)

    @app.workflow
    def ticker(ticks: int) -> int:
        log("tick")
        for _ in range(ticks):
            work(0.05)
        return ticks

    @app.workflow
    def boss(ticks: int, ctx: TaskContext) -> int:
        return int(ctx.start_child(ticker, ticks).result())

    @app.workflow
    def mom(seconds: float, ctx: TaskContext) -> dict[str, Any]:
        handle = ctx.start_child(kid, seconds)
        return {"child": handle.run_id, "pid": handle.result()}

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
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()
    with build_app(args.url, args.effects) as app:
        if args.crash:
            store = app.store
            create = store.create_child_run

            def create_then_die(*a: Any, **kw: Any) -> Any:
                created = create(*a, **kw)
                os.kill(os.getpid(), signal.SIGKILL)
                return created

            store.create_child_run = create_then_die  # type: ignore[method-assign]
        asyncio.run(app.run_worker(concurrency=4, poll_interval="100ms").run(asyncio.Event()))


if __name__ == "__main__":
    sys.exit(main())
