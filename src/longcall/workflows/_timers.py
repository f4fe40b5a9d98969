"""What ``ctx.sleep`` and ``ctx.wait_until`` accept, checked before the run records anything."""

from __future__ import annotations

import datetime
import math

from longcall.core.jobs import parse_duration
from longcall.errors import WorkflowError


def sleep_seconds(duration: float | str) -> float:
    """``duration`` in seconds: a number, or a string such as ``"90s"``, ``"15m"``, ``"3d"``."""
    if isinstance(duration, bool) or not isinstance(duration, (int, float, str)):
        raise WorkflowError(f"ctx.sleep takes seconds or a duration like '3d', not {duration!r}")
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise WorkflowError(f"ctx.sleep: {exc}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise WorkflowError(f"ctx.sleep takes a duration of 0 or more, not {duration!r}")
    return seconds


MAX_NAME = 200  # characters in a topic or an event key


def checked_name(kind: str, name: str) -> str:
    """A message topic or an event key: a non-empty string of printable characters."""
    if not isinstance(name, str) or not name.strip():
        raise WorkflowError(f"a {kind} is a non-empty string, not {name!r}")
    if len(name) > MAX_NAME or not name.isprintable():
        raise WorkflowError(
            f"a {kind} is at most {MAX_NAME} printable characters: {name[:40]!r} is not"
        )
    return name


def wake_time(when: datetime.datetime) -> float:
    """``when`` as a timestamp; a naive datetime is refused (whose clock would it be on?)."""
    if not isinstance(when, datetime.datetime):
        raise WorkflowError(f"ctx.wait_until takes a datetime, not {when!r}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise WorkflowError(
            "ctx.wait_until takes a timezone-aware datetime (datetime.now(timezone.utc) + ...)"
        )
    return when.timestamp()
