"""Cron expressions without a database: parsing, validation, previews and daylight saving."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from longcall.cron.scheduler import CronSchedule, CronValidationError, parse, preview


def utc(text: str) -> float:
    """An ISO time without zone, read as UTC, in epoch seconds."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def iso(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def local(instant: float, zone: str) -> str:
    return datetime.fromtimestamp(instant, ZoneInfo(zone)).strftime("%m-%d %H:%M:%S %Z")


def fires(expression: str, zone: str, start: str, end: str) -> list[str]:
    """The fire times in [start, end), as local times with the zone's abbreviation."""
    schedule = CronSchedule(expression, zone)
    return [local(at, zone) for at in schedule.occurrences(utc(start), utc(end))]


# -- parsing and validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["61 * * * *", "* * * *", "* * * * * * *", "a b c d e", "* * 30 2 *", "@reboot", "", "   "],
)
def test_a_bad_expression_is_a_value_error_naming_cron_expression(expression: str) -> None:
    """Wrong field counts, values out of range, never-matching dates and unknown aliases are
    ValueErrors whose field is cronExpression."""
    with pytest.raises(ValueError, match=r"^cronExpression: ") as caught:
        CronSchedule(expression, "UTC")
    assert isinstance(caught.value, CronValidationError)
    assert caught.value.field == "cronExpression"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../etc/passwd", "Europe/berlin "])
def test_an_unknown_time_zone_is_a_value_error_naming_timezone(zone: str) -> None:
    """A name that is not an IANA zone is a ValueError whose field is timezone."""
    with pytest.raises(ValueError, match=r"^timezone: ") as caught:
        CronSchedule("* * * * *", zone)
    assert isinstance(caught.value, CronValidationError)
    assert caught.value.field == "timezone"


def test_the_time_zone_is_checked_before_the_expression() -> None:
    """With both wrong, the error names the time zone (one field at a time, stable)."""
    with pytest.raises(CronValidationError) as caught:
        CronSchedule("nonsense", "Nowhere/City")
    assert caught.value.field == "timezone"


def test_six_fields_put_seconds_first() -> None:
    """A 6-field expression reads its first field as seconds."""
    schedule = CronSchedule("15,45 * * * * *", "UTC")
    assert schedule.has_seconds
    assert [iso(t) for t in schedule.next_times(3, after=utc("2026-01-01T10:00:00"))] == [
        "2026-01-01T10:00:15",
        "2026-01-01T10:00:45",
        "2026-01-01T10:01:15",
    ]
    assert [iso(t) for t in preview("0 30 9 * * *", "UTC", count=2, after=utc("2026-01-01"))] == [
        "2026-01-01T09:30:00",
        "2026-01-02T09:30:00",
    ]


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("@daily", ["2026-01-02T00:00:00", "2026-01-03T00:00:00"]),
        ("@midnight", ["2026-01-02T00:00:00", "2026-01-03T00:00:00"]),
        ("@hourly", ["2026-01-01T11:00:00", "2026-01-01T12:00:00"]),
        ("@weekly", ["2026-01-04T00:00:00", "2026-01-11T00:00:00"]),
        ("@monthly", ["2026-02-01T00:00:00", "2026-03-01T00:00:00"]),
        ("@yearly", ["2027-01-01T00:00:00", "2028-01-01T00:00:00"]),
        ("@ANNUALLY", ["2027-01-01T00:00:00", "2028-01-01T00:00:00"]),
    ],
)
def test_aliases(alias: str, expected: list[str]) -> None:
    """The @-aliases mean their standard expressions."""
    after = utc("2026-01-01T10:30:00")
    assert [iso(t) for t in preview(alias, "UTC", count=2, after=after)] == expected


def test_occurrences_are_computed_in_the_schedule_zone() -> None:
    """'0 9 * * *' in Asia/Tokyo is 00:00 UTC; in America/New_York 14:00 UTC in winter."""
    after = utc("2026-01-10T12:00:00")
    assert [iso(t) for t in preview("0 9 * * *", "Asia/Tokyo", count=1, after=after)] == [
        "2026-01-11T00:00:00"
    ]
    assert [iso(t) for t in preview("0 9 * * *", "America/New_York", count=1, after=after)] == [
        "2026-01-10T14:00:00"
    ]


def test_parse_is_cached_and_next_after_is_strict() -> None:
    """parse returns one shared schedule per (expression, zone); next_after never returns
    its argument, at_or_after does."""
    assert parse("*/5 * * * *", "UTC") is parse("*/5 * * * *", "UTC")
    schedule = parse("*/5 * * * *", "UTC")
    at = utc("2026-01-01T10:05:00")
    assert schedule.next_after(at) == at + 300
    assert schedule.at_or_after(at) == at
    assert schedule.at_or_after(at + 0.5) == at + 300


def test_last_before_returns_the_latest_occurrences_oldest_first() -> None:
    """last_before finds the latest N occurrences of a long span without walking all of it."""
    every_second = CronSchedule("* * * * * *", "UTC")
    start = utc("2026-01-01T00:00:00")
    end = start + 30 * 86400  # a month of seconds: 2.6 million occurrences
    assert every_second.last_before(end, 3, not_before=start) == [end - 3, end - 2, end - 1]
    assert every_second.last_before(start + 2, 5, not_before=start) == [start, start + 1]
    yearly = CronSchedule("0 0 1 1 *", "UTC")
    got = yearly.last_before(utc("2031-06-01"), 2, not_before=utc("2020-01-01"))
    assert [iso(t) for t in got] == ["2030-01-01T00:00:00", "2031-01-01T00:00:00"]
    assert yearly.last_before(utc("2026-06-01"), 0, not_before=utc("2020-01-01")) == []


# -- daylight saving ----------------------------------------------------------------------------


def test_spring_forward_a_skipped_time_fires_once_when_the_clocks_jump() -> None:
    """'30 2 * * *' in Europe/Berlin: 02:30 does not exist on 29 March 2026, so that day's
    occurrence fires at 03:00 CEST (the first instant after the gap), and no day is missed."""
    assert fires("30 2 * * *", "Europe/Berlin", "2026-03-27T00:00", "2026-03-31T00:00") == [
        "03-27 02:30:00 CET",
        "03-28 02:30:00 CET",
        "03-29 03:00:00 CEST",
        "03-30 02:30:00 CEST",
    ]


def test_spring_forward_an_interval_keeps_its_real_time_spacing() -> None:
    """'*/15 * * * *' in Europe/Berlin fires every 15 real minutes across the jump: the
    02:xx times that do not exist are not made up, and 03:00 fires once."""
    got = fires("*/15 * * * *", "Europe/Berlin", "2026-03-29T00:30", "2026-03-29T01:31")
    assert got == [
        "03-29 01:30:00 CET",
        "03-29 01:45:00 CET",
        "03-29 03:00:00 CEST",
        "03-29 03:15:00 CEST",
        "03-29 03:30:00 CEST",
    ]


def test_fall_back_a_repeated_time_fires_once() -> None:
    """'30 1 * * *' in America/New_York: 01:30 happens twice on 1 November 2026; it fires at
    the first (EDT) only, and the days around it fire once each."""
    assert fires("30 1 * * *", "America/New_York", "2026-10-31T00:00", "2026-11-03T00:00") == [
        "10-31 01:30:00 EDT",
        "11-01 01:30:00 EDT",
        "11-02 01:30:00 EST",
    ]


def test_fall_back_an_every_hour_expression_fires_in_both_passes() -> None:
    """'*/15 * * * *' in America/New_York fires every 15 real minutes through the repeated
    hour: 01:00 … 01:45 EDT, then 01:00 … 01:45 EST, then 02:00 EST."""
    got = fires("*/15 * * * *", "America/New_York", "2026-11-01T04:45", "2026-11-01T07:01")
    assert got == [
        "11-01 00:45:00 EDT",
        "11-01 01:00:00 EDT",
        "11-01 01:15:00 EDT",
        "11-01 01:30:00 EDT",
        "11-01 01:45:00 EDT",
        "11-01 01:00:00 EST",
        "11-01 01:15:00 EST",
        "11-01 01:30:00 EST",
        "11-01 01:45:00 EST",
        "11-01 02:00:00 EST",
    ]
    instants = list(
        CronSchedule("*/15 * * * *", "America/New_York").occurrences(
            utc("2026-11-01T04:45"), utc("2026-11-01T07:01")
        )
    )
    assert {b - a for a, b in itertools.pairwise(instants)} == {900.0}


def test_fall_back_a_fixed_hour_interval_fires_in_the_first_pass_only() -> None:
    """'*/20 1 * * *' names hour 1 only: its three times fire once each, in the EDT pass."""
    got = fires("*/20 1 * * *", "America/New_York", "2026-11-01T04:00", "2026-11-01T08:00")
    assert got == ["11-01 01:00:00 EDT", "11-01 01:20:00 EDT", "11-01 01:40:00 EDT"]


def test_a_half_hour_shift_is_handled_like_a_whole_hour() -> None:
    """Lord Howe Island moves its clocks by 30 minutes: 01:30 repeated fires once, and
    '0,30 * * * *' fires every 30 real minutes through the repeated half hour."""
    zone = "Australia/Lord_Howe"
    assert fires("30 1 * * *", zone, "2026-04-03T12:00", "2026-04-06T12:00") == [
        "04-04 01:30:00 +11",
        "04-05 01:30:00 +11",
        "04-06 01:30:00 +1030",
    ]
    schedule = CronSchedule("0,30 * * * *", zone)
    instants = list(schedule.occurrences(utc("2026-04-04T13:00"), utc("2026-04-04T17:00")))
    assert {b - a for a, b in itertools.pairwise(instants)} == {1800.0}


def _brute_force(expression: str, zone: str, start: float, end: float) -> list[float]:
    """The rules of the module docstring, applied minute by minute in real time."""
    tz = ZoneInfo(zone)
    every_hour = croniter(expression).expanded[1] == ["*"]
    # Every wall time the expression names, from two days before to two days after.
    first_wall = datetime.fromtimestamp(start, UTC).replace(tzinfo=None) - timedelta(days=2)
    it = croniter(expression, first_wall)
    named: set[datetime] = set()
    while (wall := it.get_next(datetime)) < first_wall + timedelta(days=3 + (end - start) / 86400):
        named.add(wall)
    found: list[float] = []
    previous: datetime | None = None
    for minute in range(int(start), int(end), 60):
        moment = datetime.fromtimestamp(minute, tz)
        wall = moment.replace(tzinfo=None)
        if previous is not None and wall - previous > timedelta(minutes=1):
            # Clocks jumped: the wall times skipped over fire now, once.
            skipped = previous + timedelta(minutes=1)
            while skipped < wall:
                if skipped in named:
                    found.append(float(minute))
                    break
                skipped += timedelta(minutes=1)
        repeated = moment.replace(fold=1 - moment.fold).utcoffset() != moment.utcoffset()
        second_pass = repeated and moment.fold == 1
        fires_here = wall in named and (not second_pass or every_hour)
        if fires_here and (not found or found[-1] != minute):
            found.append(float(minute))
        previous = wall
    return found


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("Europe/Berlin", "2026-03-29"),
        ("Europe/Berlin", "2026-10-25"),
        ("America/New_York", "2026-03-08"),
        ("America/New_York", "2026-11-01"),
        ("Australia/Lord_Howe", "2026-04-05"),
        ("America/Sao_Paulo", "2018-11-04"),  # clocks jumped at midnight: 00:xx never was
        ("Pacific/Apia", "2011-12-30"),  # Samoa skipped a whole day
    ],
)
@pytest.mark.parametrize(
    "expression",
    [
        "30 2 * * *",
        "*/15 * * * *",
        "30 1 * * *",
        "0 * * * *",
        "*/7 0-3 * * *",
        "0 0 * * *",
        "45 23,0 * * *",
        "0 12 * * *",
    ],
)
def test_occurrences_match_a_minute_by_minute_reading_of_the_rules(
    zone: str, day: str, expression: str
) -> None:
    """Around a transition, next_after gives exactly the times a real-time scan finds:
    nothing missed, nothing doubled, nothing out of order."""
    start = utc(f"{day}T00:00:00") - 86400
    end = start + 3 * 86400
    expected = _brute_force(expression, zone, start, end)
    got = list(CronSchedule(expression, zone).occurrences(start, end))
    assert [iso(t) for t in got] == [iso(t) for t in expected]
