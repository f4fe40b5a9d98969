"""The pure job rules of longcall.core.jobs: attach planning, readiness, responses, durations."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from longcall.core.jobs import (
    TERMINAL_STATES,
    CallIds,
    Delivery,
    Job,
    JobState,
    describe_duration,
    final_response,
    is_ready,
    parse_duration,
    plan_attach,
    progress_response,
)


def make_job(**fields: Any) -> Job:
    return Job(job_id=fields.pop("job_id", "job-1"), tool_name="export", **fields)


# -- states ------------------------------------------------------------------------------


def test_only_started_is_not_terminal() -> None:
    """STARTED is the one non-terminal state; the other four are TERMINAL_STATES."""
    assert not JobState.STARTED.terminal
    assert {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.EXPIRED,
        JobState.CANCELLED,
    } == TERMINAL_STATES
    assert all(s.terminal for s in TERMINAL_STATES)


def test_job_ids_and_attached_reflect_the_id_columns() -> None:
    """Job.ids carries the five id columns and attached needs both session and call id."""
    job = make_job(state=JobState.STARTED, app_name="a", user_id="u", session_id="s")
    assert job.ids == CallIds("a", "u", "s", None, None)
    assert not job.attached
    assert dataclasses.replace(job, call_id="c").attached
    assert not make_job(state=JobState.STARTED, call_id="c").attached


# -- plan_attach ---------------------------------------------------------------------------


def test_plan_attach_fills_every_empty_column() -> None:
    """On a job without ids every given id is filled and nothing conflicts."""
    job = make_job(state=JobState.STARTED)
    ids = CallIds(app_name="a", user_id="u", session_id="s", call_id="c", invocation_id="i")
    fill, conflicts = plan_attach(job, ids)
    assert fill == {
        "app_name": "a",
        "user_id": "u",
        "session_id": "s",
        "call_id": "c",
        "invocation_id": "i",
    }
    assert conflicts == {}


def test_plan_attach_fills_only_empty_columns_and_skips_unknown_ids() -> None:
    """Filled columns with equal values and ids given as None are left out of the fill."""
    job = make_job(state=JobState.STARTED, session_id="s", user_id="u")
    fill, conflicts = plan_attach(job, CallIds(user_id="u", session_id="s", call_id="c"))
    assert fill == {"call_id": "c"}
    assert conflicts == {}


def test_plan_attach_with_equal_values_is_a_no_op() -> None:
    """Repeating an attach with the ids the job already has fills nothing and conflicts nothing."""
    job = make_job(state=JobState.SUCCEEDED, session_id="s", call_id="c", invocation_id="i")
    assert plan_attach(job, CallIds(session_id="s", call_id="c", invocation_id="i")) == ({}, {})
    assert plan_attach(job, CallIds()) == ({}, {})


def test_plan_attach_conflict_fills_nothing() -> None:
    """Any conflicting id means no column is filled, even the empty ones."""
    job = make_job(state=JobState.STARTED, session_id="s")
    fill, conflicts = plan_attach(job, CallIds(session_id="other", call_id="c", user_id="u"))
    assert fill == {}
    assert conflicts == {"session_id": ("s", "other")}


def test_plan_attach_reports_every_conflict() -> None:
    """Each differing filled column is reported as (stored, offered)."""
    job = make_job(state=JobState.STARTED, session_id="s", call_id="c")
    _, conflicts = plan_attach(job, CallIds(session_id="s2", call_id="c2"))
    assert conflicts == {"session_id": ("s", "s2"), "call_id": ("c", "c2")}


_id = st.one_of(st.none(), st.sampled_from(["x", "y"]))
_ids = st.builds(CallIds, _id, _id, _id, _id, _id)


@given(stored=_ids, offered=_ids)
def test_plan_attach_properties(stored: CallIds, offered: CallIds) -> None:
    """A plan fills only empty columns or reports conflicts, never both, and is idempotent."""
    job = make_job(state=JobState.STARTED, **stored.as_dict())
    fill, conflicts = plan_attach(job, offered)
    assert not (fill and conflicts)
    current = stored.as_dict()
    offered_map = offered.as_dict()
    assert all(current[k] is None and offered_map[k] == v for k, v in fill.items())
    assert all(current[k] == old and offered_map[k] == new for k, (old, new) in conflicts.items())
    expected_conflicts = {
        k for k, v in offered_map.items() if v is not None and current[k] not in (None, v)
    }
    assert set(conflicts) == expected_conflicts
    if not conflicts:
        attached = dataclasses.replace(job, **fill)
        assert plan_attach(attached, offered) == ({}, {})


# -- is_ready ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_terminal_attached_undelivered_job_is_ready(state: JobState) -> None:
    """A terminal job with session and call id and nothing delivered is ready."""
    assert is_ready(make_job(state=state, session_id="s", call_id="c"))


@pytest.mark.parametrize(
    ("fields", "ready"),
    [
        ({"state": JobState.SUCCEEDED}, False),
        ({"state": JobState.SUCCEEDED, "session_id": "s"}, False),
        ({"state": JobState.SUCCEEDED, "call_id": "c"}, False),
        ({"state": JobState.STARTED, "session_id": "s", "call_id": "c"}, False),
        (
            {"state": JobState.STARTED, "session_id": "s", "call_id": "c", "notify_seq": 2},
            True,
        ),
        (
            {
                "state": JobState.STARTED,
                "session_id": "s",
                "call_id": "c",
                "notify_seq": 2,
                "notified_seq": 2,
            },
            False,
        ),
        ({"state": JobState.STARTED, "notify_seq": 2}, False),
        (
            {
                "state": JobState.SUCCEEDED,
                "session_id": "s",
                "call_id": "c",
                "delivery": Delivery.DELIVERED,
            },
            False,
        ),
        (
            {
                "state": JobState.FAILED,
                "session_id": "s",
                "call_id": "c",
                "delivery": Delivery.FAILED,
            },
            False,
        ),
        (
            {
                "state": JobState.EXPIRED,
                "session_id": "s",
                "call_id": "c",
                "delivery": Delivery.ORPHANED,
            },
            False,
        ),
        (
            {
                "state": JobState.SUCCEEDED,
                "session_id": "s",
                "call_id": "c",
                "delivery": Delivery.READY,
            },
            True,
        ),
    ],
)
def test_is_ready(fields: dict[str, Any], ready: bool) -> None:
    """Ready means: attached, not delivered or given up, and terminal or with unheard progress."""
    assert is_ready(make_job(**fields)) is ready


# -- responses -----------------------------------------------------------------------------


def test_final_response_of_a_success_carries_the_result() -> None:
    """A succeeded job's response is status, job id and the result as given."""
    job = make_job(job_id="j", state=JobState.SUCCEEDED, result={"rows": 3})
    assert final_response(job) == {"status": "succeeded", "jobId": "j", "result": {"rows": 3}}
    empty = make_job(job_id="j", state=JobState.SUCCEEDED)
    assert final_response(empty) == {"status": "succeeded", "jobId": "j", "result": None}


def test_final_response_merges_a_dict_result_without_overriding_status() -> None:
    """A failed job's dict result is merged in; its own status and jobId keys never win."""
    job = make_job(
        job_id="j",
        state=JobState.FAILED,
        result={"error": "disk full", "status": "fine", "jobId": "forged", "code": 7},
    )
    assert final_response(job) == {
        "status": "failed",
        "jobId": "j",
        "error": "disk full",
        "code": 7,
    }


def test_final_response_turns_a_non_dict_result_into_a_message() -> None:
    """A non-dict result of a non-success becomes 'message'; no result adds no key."""
    expired = make_job(job_id="j", state=JobState.EXPIRED, result="took too long")
    assert final_response(expired) == {
        "status": "expired",
        "jobId": "j",
        "message": "took too long",
    }
    listed = make_job(job_id="j", state=JobState.FAILED, result=[1, 2])
    assert final_response(listed) == {"status": "failed", "jobId": "j", "message": "[1, 2]"}
    bare = make_job(job_id="j", state=JobState.CANCELLED)
    assert final_response(bare) == {"status": "cancelled", "jobId": "j"}


def test_progress_response_shape() -> None:
    """A progress response says running and carries the job id and the latest progress."""
    job = make_job(job_id="j", state=JobState.STARTED, progress={"percent": 40})
    assert progress_response(job) == {
        "status": "running",
        "jobId": "j",
        "progress": {"percent": 40},
    }


# -- durations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (90, 90.0),
        (0, 0.0),
        (1.5, 1.5),
        ("0s", 0.0),
        ("90s", 90.0),
        ("500ms", 0.5),
        ("45m", 2700.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("2d", 172800.0),
        ("1d2h3m4s5ms", 93784.005),
        (" 1h 30m ", 5400.0),
        ("5m5s", 305.0),
    ],
)
def test_parse_duration_accepts(text: str | float, seconds: float) -> None:
    """Numbers are seconds; strings are a run of <number><unit> parts summed up."""
    assert parse_duration(text) == pytest.approx(seconds)
    assert isinstance(parse_duration(text), float)


@pytest.mark.parametrize(
    "text", ["", "   ", "10", "abc", "5x", "m5", "-5s", "1h30", "1 h x", "5s!", ".5s", "1e3s"]
)
def test_parse_duration_rejects_malformed_strings(text: str) -> None:
    """A string that is not wholly <number><unit> parts raises ValueError quoting it."""
    with pytest.raises(ValueError, match="not a duration") as info:
        parse_duration(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [-1, -0.5])
def test_parse_duration_rejects_negative_numbers(value: float) -> None:
    """A negative number of seconds raises ValueError."""
    with pytest.raises(ValueError, match="cannot be negative"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (30, "30 seconds"),
        (60, "1 minute"),
        (2700, "45 minutes"),
        (3600, "1 hour"),
        (7200, "2 hours"),
        (5400, "90 minutes"),
        (86400, "1 day"),
        (172800, "2 days"),
        (90000, "25 hours"),
        (61, "1 minute"),
        (100, "2 minutes"),
        (59.6, "60 seconds"),
    ],
)
def test_describe_duration(seconds: float, text: str) -> None:
    """Whole days, hours and minutes read as such; the rest rounds to minutes or seconds."""
    assert describe_duration(seconds) == text


@pytest.mark.parametrize("text", ["45m", "2h", "3d", "1s", "2m", "30s"])
def test_describe_duration_round_trips_parse_duration(text: str) -> None:
    """Describing a parsed whole-unit duration names the same amount."""
    described = describe_duration(parse_duration(text))
    number, unit = described.split()
    assert parse_duration(number + unit[0]) == parse_duration(text)
