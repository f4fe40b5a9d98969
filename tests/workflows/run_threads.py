"""A run worker in a thread of its own, for tests that need runs executed as a deployment
would execute them (claimed, woken, resumed) without starting a process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from longcall import App


@contextlib.contextmanager
def worker_running(app: App, **options: Any) -> Iterator[None]:
    """A RunWorker claiming and executing runs in a thread of its own, for the block."""
    settings = {"concurrency": 4, "poll_interval": "20ms", "grace": "1s", **options}
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await app.run_worker(**settings).run(box["stop"])

    thread = threading.Thread(target=asyncio.run, args=(main(),))
    thread.start()
    ready.wait(5)
    try:
        yield
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
