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


def watch_in_thread(
    store: Store,
    channel: str,
    wake: Callable[[], None],
    stop: threading.Event,
    room: threading.Event,
) -> threading.Thread | None:
    """Like :func:`listen_in_thread`, for work any one of many processes can take: this
    process listens only while it holds the store's one watch on ``channel``, and only while
    ``room`` is set (it can take more work); without room it hands the watch on. ``wake`` is
    also called as the watch is taken, for what was notified while nobody watched.

    None for a store without notifications (SQLite).
    """
    watch_of = getattr(store, "watch", None)
    if watch_of is None:
        return None

    def loop() -> None:
        watch = watch_of(channel)
        try:
            while not stop.is_set():
                if not room.is_set():
                    watch.give_up()
                    room.wait(0.5)
                elif not watch.held:
                    if watch.take(0.5):
                        wake()
                elif watch.wait(0.5):
                    wake()
        finally:
            watch.close()

    thread = threading.Thread(target=loop, name=f"longcall-watch-{channel}", daemon=True)
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
