"""Named queues for background runs: their limits, and what a queue holds now.

A queue's limits live in the store (``lc_queues``), so every worker process on every host
enforces the same numbers. ``concurrency`` caps the runs of the queue running at once across
all workers; ``worker_concurrency`` caps those one worker holds; ``rate`` ("100/min") caps the
claims in any sliding window of the period. Runs that wait (for input, a timer or a message)
hold no slot: only ``running`` runs count, so a queue of runs that mostly wait is not blocked
by them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
          "h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}  # fmt: skip
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*([a-z]+?)s?\s*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def parse_rate(rate: str) -> tuple[int, float]:
    """``"100/min"``, ``"5/s"``, ``"10/30s"``, ``"1000/hour"``: (count, period in seconds)."""
    match = _RATE.match(rate.lower())
    if match is None or match[3] not in _UNITS:
        raise ValueError(f"rate {rate!r} is not 'N/period' (e.g. '100/min', '5/s', '10/30s')")
    count, scale = int(match[1]), float(match[2] or 1)
    if count < 1 or scale <= 0:
        raise ValueError(f"rate {rate!r} must allow at least 1 run in a positive period")
    return count, scale * _UNITS[match[3]]


def check_queue_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"queue name {name!r} must be 1-128 letters, digits or _.:- (starting with a "
            "letter or digit)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Queue:
    """A named queue's limits; ``None`` is no limit. ``priority`` says whether submits may
    give a priority (lower runs first; FIFO among equals)."""

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    rate_limit: int | None = None
    rate_period: float | None = None
    priority: bool = False

    def __post_init__(self) -> None:
        check_queue_name(self.name)
        for what in ("concurrency", "worker_concurrency", "rate_limit"):
            value = getattr(self, what)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):  # fmt: skip
                raise ValueError(f"queue {self.name!r}: {what} must be a positive integer")
        if (self.rate_limit is None) != (self.rate_period is None):
            raise ValueError(f"queue {self.name!r}: a rate needs both a count and a period")

    @property
    def rate(self) -> str | None:
        """The rate limit as given to :meth:`App.queue`, in seconds: ``"100/60s"``."""
        if self.rate_limit is None:
            return None
        return f"{self.rate_limit}/{self.rate_period:g}s"


@dataclass(frozen=True, slots=True)
class QueueStats:
    """What a queue holds now: its runs not finished by status (``queued``, ``running``,
    ``waiting_input``, ``sleeping``), the total of them (``depth``: queued ones), and how
    long the oldest queued run has waited, in seconds (None: nothing queued)."""

    queue: Queue
    counts: dict[str, int] = field(default_factory=dict)
    oldest_queued_age: float | None = None

    @property
    def depth(self) -> int:
        return self.counts.get("queued", 0)
