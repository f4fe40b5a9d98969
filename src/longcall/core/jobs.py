"""The job: one row joining a tool's job id, the agent session and the function-call id.

This module holds the value object and the pure rules (no I/O). The store applies the same
rules in SQL, atomically; these functions are what the SQL is checked against in the tests.

States: ``started`` then exactly one terminal state. Delivery is tracked apart from the
state: a job is *ready* when it is terminal (or has progress the model should hear), has its
session and call id, and nothing is delivered yet.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class JobState(StrEnum):
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self is not JobState.STARTED


TERMINAL_STATES = frozenset(s for s in JobState if s.terminal)


class Delivery(StrEnum):
    """Where the job's function response stands, apart from the job's own state."""

    NONE = "none"  # nothing to hand to the agent yet
    READY = "ready"  # a final result (or progress to announce) waits for the deliverer
    DELIVERED = "delivered"  # the final response is in the session
    FAILED = "failed"  # delivery was retried up to the limit and given up; visible, not lost
    ORPHANED = "orphaned"  # the session has no such call; can never be delivered


USER_SUFFIX_HEX = 16  # hex characters of the user's digest in a namespaced job id


def job_id_for(key: str, user_id: str | None) -> str:
    """The job id for ``key`` in ``user_id``'s namespace: ``key@<16 hex>``, or ``key`` alone.

    The suffix is the first 16 hex characters of the SHA-256 of the user id (UTF-8), so one
    user's ids can never name, block or reveal another user's jobs: Mallory creating
    ``report:Q4`` makes ``report:Q4@<hers>``, and Ana's tool with the same key still gets
    ``report:Q4@<Ana's>``, its own job. A call without a user (library use without users)
    keeps the bare key. Every place longcall derives a job id from a key uses this rule.
    """
    if user_id is None:
        return key
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()
    return f"{key}@{digest[:USER_SUFFIX_HEX]}"


@dataclass(frozen=True, slots=True)
class CallIds:
    """What the agent side knows of a call; any field may be unknown (None)."""

    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "call_id": self.call_id,
            "invocation_id": self.invocation_id,
        }


@dataclass(frozen=True, slots=True, order=True)
class SessionKey:
    """One conversation, as google-adk names it: a session id within an app and a user.

    Several apps (an ``adk api_server`` agents folder) and users may share one database, and
    the same session id in two of them is two conversations: each has its own lease. ``""``
    stands for an app or user that is not known. Keys sort by app, user, then session id
    (the order claims take leases in).
    """

    app_name: str
    user_id: str
    session_id: str

    def as_dict(self) -> dict[str, str]:
        return {"app_name": self.app_name, "user_id": self.user_id, "session_id": self.session_id}

    def __str__(self) -> str:
        return f"{self.app_name or '-'}/{self.user_id or '-'}/{self.session_id}"


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job row."""

    job_id: str
    tool_name: str
    state: JobState
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None
    pending_message: str | None = None
    pending_fields: dict[str, Any] | None = None  # what the tool returned beside its message
    progress: Any = None
    progress_seq: int = 0
    notify_seq: int = 0
    notified_seq: int = 0
    deadline_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    delivered_at: float | None = None
    delivery: Delivery = Delivery.NONE
    available_at: float | None = None
    claim_holder: str | None = None
    attempts: int = 0
    last_error: str | None = None
    attached_at: float | None = None  # when both session and call id were known
    claim_fence: int | None = None  # the session's fence when this claim was taken
    # The W3C trace context (a JSON object: traceparent, tracestate) of the span the job was
    # created in (schema 15), for the spans of its completion and delivery to link to.
    trace_context: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    @property
    def attached(self) -> bool:
        """True once both halves of the join (session and call id) are known."""
        return self.session_id is not None and self.call_id is not None

    @property
    def session_key(self) -> SessionKey:
        """The conversation this job answers into (it must have a session id)."""
        assert self.session_id is not None, f"job {self.job_id} has no session"
        return SessionKey(self.app_name or "", self.user_id or "", self.session_id)

    @property
    def ids(self) -> CallIds:
        return CallIds(
            self.app_name, self.user_id, self.session_id, self.call_id, self.invocation_id
        )


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of a listing, newest first, and the (created_at, job_id) the next page starts
    before: None when there is no next page."""

    jobs: list[Job]
    next: tuple[float, str] | None


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's append-only log."""

    job_id: str
    seq: int
    kind: str
    data: Any
    created_at: float


@dataclass(frozen=True, slots=True)
class FinishOutcome:
    """What a complete / fail / cancel / expire call did."""

    changed: bool  # False: the job was already terminal; the earlier result stands
    job: Job
    # True: the result came at or after the job's deadline, so the deadline answered instead:
    # the result is recorded as late and the job is expired (by this call or before it).
    late: bool = False


# Status words that say "still working", longcall's and those of ADK's samples and docs
# ("in-progress"), compared as :func:`status_word` spells them.
STILL_WORKING = frozenset(
    {"pending", "running", "in_progress", "started", "queued", "submitted", "processing", "waiting"}
)


def status_word(value: Any) -> str:
    """A status as longcall compares it: ``"In-Progress"`` is ``"in_progress"``."""
    return str(value).strip().lower().replace("-", "_").replace(" ", "_")


def plan_attach(job: Job, ids: CallIds) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Which columns an attach fills, and which it would overwrite (conflicts).

    Only empty columns are filled. A value equal to the stored one is neither. A different
    value for a filled column is a conflict, and then nothing at all is written.
    """
    fill: dict[str, str] = {}
    conflicts: dict[str, tuple[str, str]] = {}
    current = job.ids.as_dict()
    for name, new in ids.as_dict().items():
        if new is None:
            continue
        old = current[name]
        if old is None:
            fill[name] = new
        elif old != new:
            conflicts[name] = (old, new)
    return ({} if conflicts else fill), conflicts


def is_ready(job: Job) -> bool:
    """Whether the deliverer has something to hand to the agent for this job."""
    if not job.attached or job.delivery is not Delivery.NONE:
        return job.delivery is Delivery.READY
    return job.terminal or job.notify_seq > job.notified_seq


def final_response(job: Job) -> dict[str, Any]:
    """The function response that closes the call: status, job id and what the job produced."""
    body: dict[str, Any] = {"status": job.state.value, "jobId": job.job_id}
    if job.state is JobState.SUCCEEDED:
        body["result"] = job.result
    elif isinstance(job.result, dict):
        body.update({k: v for k, v in job.result.items() if k not in body})
    elif job.result is not None:
        body["message"] = str(job.result)
    return body


def progress_response(job: Job) -> dict[str, Any]:
    """An intermediate function response for the same call: the job is still running."""
    return {"status": "running", "jobId": job.job_id, "progress": job.progress}


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float | int) -> float:
    """Seconds from ``90``, ``"500ms"``, ``"45m"``, ``"1h30m"`` or ``"2d"``."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"a duration must be finite: {value!r}")
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return float(value)
    text = value.strip().replace(" ", "")
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {value!r} (use e.g. '90s', '45m', '1h30m', '2d')")
    return total


def describe_duration(seconds: float) -> str:
    """``2700`` -> ``"45 minutes"``: for messages the model passes on to a person."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"not a duration: {seconds!r}")
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    if seconds >= 60:
        n = math.floor(seconds / 60 + 0.5)  # half up: 90 s is "2 minutes", 150 s "3 minutes"
        return f"{n} minute{'s' if n != 1 else ''}"
    n = math.floor(seconds + 0.5)
    return f"{n} second{'s' if n != 1 else ''}"


def expired_result(job: Job) -> dict[str, object]:
    """The result an expired job answers its call with."""
    if job.deadline_at is None:
        message = "No result arrived in time."
    else:
        message = f"No result within {describe_duration(job.deadline_at - job.created_at)}."
    return {"message": message, "deadlineAt": job.deadline_at}
