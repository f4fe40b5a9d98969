"""Cron expressions in a time zone: parsing, validating and the occurrences they name."""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import (
    CroniterBadDateError,
    croniter,
)

from longcall.errors import (
    CronValidationError,
)

log = logging.getLogger("longcall.cron")


ALIASES: Final = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
MAX_CATCH_UP: Final = 1000
_EPOCH: Final = datetime(1970, 1, 1)
_HOUR_FIELD: Final = 1


def _epoch(wall: datetime, offset: timedelta) -> float:
    return (wall - offset - _EPOCH).total_seconds()


def _zone(timezone: str) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone.strip():
        raise CronValidationError("timezone", "give an IANA time zone name such as 'UTC'")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronValidationError(
            "timezone", f"unknown time zone {timezone!r}; use an IANA name like 'Europe/Berlin'"
        ) from exc


class CronSchedule:
    """A parsed expression in a time zone: its occurrences as UTC epoch seconds.

    Immutable and safe to share between threads (each computation makes its own iterator).
    """

    __slots__ = ("_every_hour", "_expr", "_seconds", "expression", "timezone", "zone")

    def __init__(self, expression: str, timezone: str = "UTC") -> None:
        self.zone = _zone(timezone)
        self.timezone = timezone
        if not isinstance(expression, str) or not expression.strip():
            raise CronValidationError("cronExpression", "empty; e.g. '*/5 * * * *'")
        self.expression = expression
        text = " ".join(expression.split())
        if text.startswith("@"):
            if text.lower() not in ALIASES:
                raise CronValidationError(
                    "cronExpression",
                    f"unknown alias {text!r}; use one of {', '.join(sorted(ALIASES))}",
                )
            text = text.lower()
            self._seconds = False
        else:
            fields = len(text.split(" "))
            if fields not in (5, 6):
                raise CronValidationError(
                    "cronExpression",
                    f"{expression!r} has {fields} field(s); give 5 (minute hour day-of-month "
                    "month day-of-week) or 6 with seconds first",
                )
            self._seconds = fields == 6
        self._expr = text
        try:
            it = croniter(text, _EPOCH, second_at_beginning=self._seconds)
            it.get_next(datetime)
        except CroniterBadDateError as exc:
            raise CronValidationError(
                "cronExpression", f"{expression!r} never matches a date"
            ) from exc
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise CronValidationError("cronExpression", f"{expression!r}: {exc}") from exc
        self._every_hour = it.expanded[_HOUR_FIELD] == ["*"]

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r}, {self.timezone!r})"

    @property
    def has_seconds(self) -> bool:
        return self._seconds

    # -- wall clock to instants ---------------------------------------------------------

    def _walls(self, after: datetime) -> Iterator[datetime]:
        """The local wall-clock times the expression names, strictly after ``after`` (naive)."""
        it = croniter(self._expr, after, second_at_beginning=self._seconds)
        while True:
            try:
                yield it.get_next(datetime)
            except CroniterBadDateError:
                return

    def _offset(self, instant: float) -> timedelta:
        offset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        assert offset is not None
        return offset

    def _instants(self, wall: datetime) -> tuple[float, float | None]:
        """When a wall time happens: (first, second), second only for a repeated time.

        A time in a gap happens at the first instant after the gap (the transition)."""
        early = wall.replace(tzinfo=self.zone)
        late = wall.replace(tzinfo=self.zone, fold=1)
        o_early, o_late = early.utcoffset(), late.utcoffset()
        assert o_early is not None and o_late is not None
        if o_early == o_late:
            return _epoch(wall, o_early), None
        a, b = sorted((_epoch(wall, o_early), _epoch(wall, o_late)))
        if self._wall(a) == wall and self._wall(b) == wall:
            return a, b
        return self._transition(a, b), None

    def _wall(self, instant: float) -> datetime:
        return datetime.fromtimestamp(instant, self.zone).replace(tzinfo=None)

    def _transition(self, lo: float, hi: float) -> float:
        """The first whole second in (lo, hi] whose offset differs from lo's."""
        before = self._offset(lo)
        low, high = math.floor(lo), math.ceil(hi)
        while high - low > 1:
            mid = (low + high) // 2
            if self._offset(mid) == before:
                low = mid
            else:
                high = mid
        return float(high)

    # -- occurrences --------------------------------------------------------------------

    def next_after(self, after: float) -> float | None:
        """The first occurrence strictly after ``after`` (None: none within 50 years)."""
        local = datetime.fromtimestamp(after, self.zone)
        wall = local.replace(tzinfo=None)
        other = local.replace(fold=1 - local.fold).utcoffset()
        offset = local.utcoffset()
        assert offset is not None and other is not None
        repeated = other != offset  # ``after`` is in an hour that happens twice
        if repeated and local.fold == 1:
            # In the second pass: walls later in the repeated hour happen again after
            # ``after`` (every-hour expressions) or have had their one occurrence already.
            for w in self._walls(wall):
                first, second = self._instants(w)
                if second is not None:
                    if self._every_hour:
                        return second
                    continue
                if first > after:
                    return first
            return None
        best: float | None = None
        for w in self._walls(wall):
            first, _ = self._instants(w)
            if first > after:
                best = first
                break
        if repeated and self._every_hour:
            # In the first pass: walls up to ``after``'s own come round again after it.
            shift = offset - other
            for w in self._walls(wall - shift):
                if w > wall:
                    break
                _, second = self._instants(w)
                if second is not None and second > after:
                    if best is None or second < best:
                        best = second
                    break
        return best

    def at_or_after(self, when: float) -> float | None:
        """The first occurrence at ``when`` or later (occurrences are whole seconds)."""
        return self.next_after(math.ceil(when) - 1.0)

    def occurrences(self, start: float, end: float | None = None) -> Iterator[float]:
        """Occurrences from ``start`` (included) to ``end`` (excluded; None: no end)."""
        at = self.at_or_after(start)
        while at is not None and (end is None or at < end):
            yield at
            at = self.next_after(at)

    def next_times(self, count: int, *, after: float) -> list[float]:
        """The next ``count`` occurrences strictly after ``after``."""
        found: list[float] = []
        at = self.next_after(after)
        while at is not None and len(found) < count:
            found.append(at)
            at = self.next_after(at)
        return found

    def last_before(self, end: float, count: int, *, not_before: float) -> list[float]:
        """The latest ``count`` occurrences in [``not_before``, ``end``), oldest first."""
        if count <= 0 or end <= not_before:
            return []
        first = self.at_or_after(not_before)
        if first is None or first >= end:
            return []
        second = self.next_after(first)
        period = max(1.0, (second - first) if second is not None else end - first)
        span = period * count * 2
        while True:
            low = max(not_before, end - span)
            window: deque[float] = deque(maxlen=count)
            seen = 0
            for at in self.occurrences(low, end):
                window.append(at)
                seen += 1
            if seen >= count or low <= not_before:
                return list(window)
            span *= 4


@lru_cache(maxsize=1024)
def parse(expression: str, timezone: str = "UTC") -> CronSchedule:
    """The schedule of ``expression`` in ``timezone`` (cached); CronValidationError if bad."""
    return CronSchedule(expression, timezone)


def preview(expression: str, timezone: str = "UTC", *, count: int = 5, after: float) -> list[float]:
    """The next ``count`` fire times after ``after``, as UTC epoch seconds."""
    return parse(expression, timezone).next_times(count, after=after)
