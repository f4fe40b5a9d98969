"""Waits between retries: exponential, capped, and jittered so that clients failing together
do not retry together. Every retry loop in longcall draws its wait here."""

from __future__ import annotations

import random


def jittered(ceiling: float) -> float:
    """A wait drawn evenly between half of ``ceiling`` and all of it."""
    return ceiling * (0.5 + random.random() / 2)


def exponential_ceiling(attempt: int, *, base: float, cap: float, factor: float = 2.0) -> float:
    """``base``, ``base``·factor, ``base``·factor² … for attempts 1, 2, 3 …, at most ``cap``."""
    return min(cap, base * factor ** max(attempt - 1, 0))


def exponential(attempt: int, *, base: float, cap: float, factor: float = 2.0) -> float:
    """The jittered wait after the ``attempt``-th failure (see :func:`exponential_ceiling`)."""
    return jittered(exponential_ceiling(attempt, base=base, cap=cap, factor=factor))
