"""Time, behind a protocol, so deadlines, leases and throttles are testable without sleeping.

The system clock defers to the database where the database keeps time: a store given a
:class:`SystemClock` lets PostgreSQL compare leases and deadlines on its own clock, so a host
with a skewed clock cannot steal a live lease. A :class:`FakeClock` is authoritative
everywhere, which is what a test of a 45-minute deadline needs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Where longcall reads the time and how it waits."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait this long (a fake clock may return at once)."""
        ...

    @property
    def authoritative(self) -> bool:
        """True when the store must use this clock instead of the database's."""
        ...


class SystemClock:
    """The host's clock; stores that have a clock of their own prefer theirs."""

    authoritative = False

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to. ``sleep`` yields to the loop without waiting."""

    authoritative = True

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        """Jump to an absolute time (never backwards)."""
        if when < self._now:
            raise ValueError("a FakeClock never goes backwards")
        self._now = when

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError("a FakeClock never goes backwards")
        self._now += seconds
        return self._now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)
