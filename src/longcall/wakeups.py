"""Waking the loops that poll the store: PostgreSQL notifications, or the next poll."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from longcall.store import Store


def listen_in_thread(
    store: Store, channel: str, wake: Callable[[], None], stop: threading.Event
) -> threading.Thread | None:
    """Call ``wake`` from a thread each time ``channel`` is notified, until ``stop`` is set.

    None for a store without notifications (SQLite): its loops find work by polling.
    """
    listen = getattr(store, "listen", None)
    if listen is None:
        return None

    def loop() -> None:
        listener = listen(channel)
        try:
            while not stop.is_set():
                if listener.wait(0.5):
                    wake()
        finally:
            listener.close()

    thread = threading.Thread(target=loop, name=f"longcall-listen-{channel}", daemon=True)
    thread.start()
    return thread


async def wait_any(stop: asyncio.Event, wake: asyncio.Event | None, seconds: float) -> None:
    """Wait until ``stop`` or ``wake`` is set, or ``seconds`` have passed."""
    waiters: list[asyncio.Task[Any]] = [asyncio.create_task(stop.wait())]
    if wake is not None:
        waiters.append(asyncio.create_task(wake.wait()))
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
