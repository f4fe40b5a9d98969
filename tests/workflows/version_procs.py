"""A run worker registering one version of the ``order`` workflow, in its own process.

Run by path: ``python tests/workflows/version_procs.py --url URL --version V --effects FILE``.
It builds :func:`build_app` for version ``V`` and runs a RunWorker until SIGTERM, then exits 0.
The test process imports :func:`build_app` too, to submit runs of either version.

Version "1" of ``order`` calls ``charge`` then ``ship``; version "2" calls ``charge``,
``notify`` and ``ship``. Every task appends ``<run_id> <task> <version> <pid>`` to the
effects file (one ``write`` with ``O_APPEND``) and returns the code version that ran it, so
both the store (the result) and the effects say which code executed which run.

``patchy`` (either version) asks ``ctx.patched("slow-path")`` and, on the new path, calls
``slow``, which with ``--block FILE`` writes its pid to FILE and sleeps (to be SIGKILLed there)
the first time, that is while FILE does not exist yet.
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


def log_effect(path: Path | None, line: str) -> None:
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def read_effects(*paths: Path) -> list[tuple[str, str, str, int]]:
    """The ``(run_id, task, version, pid)`` lines of the files."""
    found = []
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                run_id, task, version, pid = line.split()
                found.append((run_id, task, version, int(pid)))
    return found


def build_app(
    url: str, version: str, effects: Path | None = None, block: Path | None = None
) -> App:
    app = App(url, run_lease="2s")

    def make(name: str):  # type: ignore[no-untyped-def]
        def task(n: int, ctx: TaskContext) -> str:
            log_effect(effects, f"{ctx.run_id} {name} {version}")
            return version

        return app.task(task, name=name)

    charge, notify, ship = make("charge"), make("notify"), make("ship")

    @app.workflow("order", version=version)
    def order(n: int) -> dict[str, object]:
        ran = [charge(n)]
        if version == "2":
            ran.append(notify(n))
        ran.append(ship(n))
        return {"n": n, "code": sorted(set(ran))}

    @app.task(name="slow")
    def slow(ctx: TaskContext) -> str:
        log_effect(effects, f"{ctx.run_id} slow {version}")
        if block is not None and not block.exists():
            block.write_text(str(os.getpid()))
            time.sleep(120)  # killed here
        return "new"

    @app.workflow("patchy", version=version)
    def patchy(ctx: TaskContext) -> str:
        return slow() if ctx.patched("slow-path") else "old"

    return app


async def serve(app: App) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await app.run_worker(concurrency=4, poll_interval="100ms").run(stop)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--block", type=Path)
    args = parser.parse_args()
    app = build_app(args.url, args.version, args.effects, args.block)
    try:
        asyncio.run(serve(app))
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
