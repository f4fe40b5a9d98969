"""A cron scheduler in its own process, for the multi-process test.

Run by path: ``python tests/workflows/cron_procs.py --url URL --seconds N``. It builds an
:class:`~longcall.App` on ``URL`` (the system clock), runs a
:class:`~longcall.cron._scheduler.Scheduler` for ``N`` seconds, and prints one JSON line:
``{"claimed": <occurrences this process claimed>, "pid": <pid>}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from longcall import App
from longcall.cron import Scheduler


async def run_for(scheduler: Scheduler, seconds: float) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    await scheduler.run(stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    with App(args.url) as app:
        scheduler = Scheduler(app.runtime)
        asyncio.run(run_for(scheduler, args.seconds))
        print(json.dumps({"claimed": scheduler.claimed, "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
