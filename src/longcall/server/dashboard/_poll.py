"""How often the live streams of pages without a change feed (runs, schedules) ask the store
again: the cadence their pages polled at before the server sent them."""

from __future__ import annotations

import time

EVERY = 2.0  # seconds


class Throttle:
    """Says yes at most once every :data:`EVERY` seconds (and the first time)."""

    def __init__(self) -> None:
        self._last: float | None = None

    def due(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < EVERY:
            return False
        self._last = now
        return True
