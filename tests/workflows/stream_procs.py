"""A worker process for the stream tests: it executes ``talker`` runs until it is killed.

Run by path: ``python tests/workflows/stream_procs.py --url URL [--block-after K --marker F]``.
``talker({"count": N, "gap": seconds})`` writes ``"started"`` to the stream ``status`` from
its body, then its task ``speak`` writes N tokens (``"w0 "``, ``"w1 "``, …) to ``tokens``,
``gap`` seconds apart, and the body writes ``"done"`` to ``status``. With ``--block-after K``
the task writes ``--marker`` after its K-th token and then sleeps, so the test can SIGKILL
the worker in the middle of a token stream.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from longcall import App
from longcall.workflows import TaskContext

LEASE = "1s"


def build_app(url: str, *, block_after: int | None = None, marker: Path | None = None) -> App:
    app = App(url, run_lease=LEASE)

    @app.task
    def speak(count: int, gap: float, ctx: TaskContext) -> str:
        words = []
        for n in range(count):
            word = f"w{n} "
            ctx.stream("tokens", word)
            words.append(word)
            if block_after is not None and n + 1 == block_after:
                assert marker is not None
                marker.write_text("blocked")
                time.sleep(3600)
            time.sleep(gap)
        return "".join(words)

    @app.workflow("talker")
    def talker(talk: dict[str, Any], ctx: TaskContext) -> str:
        ctx.stream("status", "started")
        text = speak(talk["count"], talk["gap"])
        ctx.stream("status", "done")
        return text

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--block-after", type=int, default=None)
    parser.add_argument("--marker", type=Path, default=None)
    args = parser.parse_args()
    with build_app(args.url, block_after=args.block_after, marker=args.marker) as app:
        print("ready", flush=True)
        worker = app.run_worker(concurrency=2, poll_interval="50ms")
        asyncio.run(worker.run(asyncio.Event()))


if __name__ == "__main__":
    sys.exit(main())
