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

    def step(listener: Any) -> None:
        if listener.wait(0.5):
            wake()

    return _follow(store, "listen", channel, stop, step)


# How often the watch's holder looks up from its notifications to see whether its worker is
# full. A burst of queued runs fills the holder at once; the next worker takes the watch (and
# claims) only once the holder has let go, so each hand-on waits up to this long, and the
# workers after the first would otherwise join a burst only at their polls.
HOLDER_CHECKS_ROOM = 0.05


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

    def step(watch: Any) -> None:
        if not room.is_set():
            watch.give_up()
            room.wait(0.5)
        elif not watch.held:
            if watch.take(0.5):
                wake()
        elif watch.wait(HOLDER_CHECKS_ROOM):
            wake()

    return _follow(store, "watch", channel, stop, step)


def _follow(
    store: Store, opener: str, channel: str, stop: threading.Event, step: Callable[[Any], None]
) -> threading.Thread | None:
    """A daemon thread that opens ``store.<opener>(channel)`` and runs ``step`` on it until
    ``stop`` is set; None when the store has no such method."""
    open_on = getattr(store, opener, None)
    if open_on is None:
        return None

    def loop() -> None:
        listener = open_on(channel)
        try:
            while not stop.is_set():
                step(listener)
        finally:
            listener.close()

    thread = threading.Thread(target=loop, name=f"longcall-{opener}-{channel}", daemon=True)
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
