"""A five-task workflow in its own process, for the crash tests.

Run by path: ``python tests/workflows/wf_procs.py --url URL --effects FILE --run-id ID
(start|continue)``. It builds an :class:`~longcall.App` on ``URL`` with a one-second run
lease and the ``pipeline`` workflow (:func:`build_app`), whose tasks ``step1`` … ``step5``
each append ``<task> <pid>`` to ``--effects`` (``O_APPEND``, one ``write`` per line) before
doing their work.

``start`` runs ``pipeline`` under ``--run-id``; with ``--block-at N`` task N writes
``--marker`` once it has logged its start and then sleeps, so the test can SIGKILL the process
in the middle of that task. ``continue`` calls ``app.continue_run`` until the dead holder's
lease has run out (it answers RunStateError until then) and prints the run as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pydantic

from longcall import App
from longcall.errors import RunStateError

LEASE = "1s"
TASKS = 5


class Order(pydantic.BaseModel):
    order_id: str
    amount: int


def log_effect(path: Path, task: str) -> None:
    """Append one line for ``task`` in this process, in one write (atomic with O_APPEND)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{task} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def read_effects(path: Path) -> list[tuple[str, int]]:
    """The ``(task, pid)`` lines in the order they were written."""
    if not path.exists():
        return []
    return [
        (task, int(pid))
        for task, pid in (line.split() for line in path.read_text().split("\n") if line)
    ]


def build_app(
    url: str, effects: Path, *, block_at: int | None = None, marker: Path | None = None
) -> App:
    """The App with tasks ``step1`` … ``step5`` and the ``pipeline`` workflow calling each once."""
    app = App(url, run_lease=LEASE)

    def make_step(number: int) -> Any:
        def step(order_id: str, total: int) -> int:
            log_effect(effects, f"step{number}")
            if number == block_at:
                assert marker is not None
                marker.write_text(str(os.getpid()))
                time.sleep(120)  # killed here
            return total + number * 10

        return app.task(step, name=f"step{number}")

    steps = [make_step(n) for n in range(1, TASKS + 1)]

    @app.workflow("pipeline")
    def pipeline(order: Order) -> dict[str, Any]:
        total = order.amount
        for step in steps:
            total = step(order.order_id, total)
        return {"order_id": order.order_id, "total": total}

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "continue"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--block-at", type=int)
    parser.add_argument("--marker", type=Path)
    parser.add_argument("--give-up", type=float, default=15.0)
    args = parser.parse_args(argv)
    app = build_app(args.url, args.effects, block_at=args.block_at, marker=args.marker)
    try:
        if args.mode == "start":
            run = app.run_workflow("pipeline", Order(order_id="A-1", amount=1), run_id=args.run_id)
        else:
            deadline = time.monotonic() + args.give_up
            refused = 0
            while True:
                try:
                    run = app.continue_run(args.run_id)
                    break
                except RunStateError:
                    refused += 1
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            print(json.dumps({"refused": refused}), file=sys.stderr)
        print(json.dumps({"status": run.status.value, "result": run.result, "error": run.error}))
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
