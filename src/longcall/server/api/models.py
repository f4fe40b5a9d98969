"""The JSON bodies the API answers with, beyond the records of :mod:`longcall.shapes`: pages
of lists, a record with its details, event logs, and the small answers of single actions.

Handlers build these and answer with them (``_requests.reply``); ``/openapi.json`` documents
each operation's answers with the same models, so the two cannot drift apart. Every error has
the shape of :class:`longcall.server.errors.Error` (refused answers to a run's questions add
the list of problems).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic

from longcall.core.cron import FireOutcome
from longcall.core.runs import RunStatus
from longcall.server.errors import Error, ErrorDetail
from longcall.shapes import (
    Cron,
    CronFire,
    Event,
    HistoryStep,
    Job,
    PendingInterrupt,
    Run,
    Shape,
    Step,
    Time,
    ZonedTime,
)

NEXT_TIMES = 5  # fire times a schedule's details show
RECENT_FIRES = 20  # claimed occurrences a schedule's details show
Cursor = Annotated[
    str | None, pydantic.Field(description="The `cursor` of the next page (null: the last page).")
]


# -- health -----------------------------------------------------------------------------------


class Up(Shape):
    status: Literal["ok"] = "ok"


class Ready(Shape):
    status: Literal["ready"] = "ready"


class NotReady(Shape):
    status: Literal["unavailable"] = "unavailable"
    reasons: list[str]


# -- jobs -------------------------------------------------------------------------------------


class JobList(Shape):
    jobs: list[Job]
    next_cursor: Cursor


class Changed(Shape):
    """Whether an action changed the job, and the job after it."""

    changed: bool
    job: Job


class Events(Shape):
    """A job's or a run's event log, oldest first."""

    events: list[Event]


class HookAnswer(Shape):
    """What became of a signed delivery."""

    outcome: Literal["applied", "unchanged", "duplicate", "early", "unknown_job"]
    job_id: str


class FunctionCall(Shape):
    id: str
    name: str
    args: dict[str, Any]


class FunctionResponse(Shape):
    id: str
    name: str
    response: dict[str, Any]


class TranscriptEvent(Shape):
    author: str
    invocation_id: str
    text: str | None
    function_calls: list[FunctionCall]
    function_responses: list[FunctionResponse]


class Transcript(Shape):
    session_id: str
    user_id: str
    events: list[TranscriptEvent]


# -- runs and workers -------------------------------------------------------------------------


class RunDetails(Run):
    """A run with the questions it waits on and its task checkpoints."""

    pending_interrupts: list[PendingInterrupt]
    steps: list[Step]
    children: Annotated[
        list[Run], pydantic.Field(description="The runs it started as children, oldest first.")
    ]


class History(Shape):
    """A run's steps in order, each with its output and the state after it."""

    run_id: str
    steps: list[HistoryStep]


class Problem(Shape):
    field: str | None
    message: str


class AnswerRefusal(ErrorDetail):
    errors: Annotated[list[Problem], pydantic.Field(description="Every problem, the first first.")]


class AnswersRefused(Error):
    """Answers that do not fit their questions: every problem, in ``errors``."""

    error: AnswerRefusal


class Duplicate(Shape):
    """A submit refused: the queue has an active run with the same dedupe id."""

    error: ErrorDetail
    run_id: str


class QueueLimits(Shape):
    concurrency: int | None
    worker_concurrency: int | None
    rate: str | None
    priority: bool


class QueueInfo(Shape):
    name: str
    limits: QueueLimits
    counts: dict[str, int]
    depth: int
    oldest_queued_age_secs: float | None


class QueueList(Shape):
    queues: list[QueueInfo]


class RunList(Shape):
    runs: list[Run]
    next_cursor: Cursor


class WorkflowVersion(Shape):
    """One version of one workflow with runs not finished, counted by status."""

    workflow_id: str
    version: str
    queued: int
    running: int
    waiting_input: int
    sleeping: int
    active: Annotated[int, pydantic.Field(description="Its runs not finished, in all.")]
    oldest_created_at: Time


class WorkflowVersions(Shape):
    versions: list[WorkflowVersion]


class Worker(Shape):
    worker_id: str
    workflows: list[str]
    started_at: Time
    heartbeat_at: Time
    expires_at: Time


class WorkerList(Shape):
    workers: list[Worker]


# -- cron -------------------------------------------------------------------------------------


class LastExecution(Shape):
    """The latest run a schedule started, with its status now (null fields: its record was
    pruned, or the run is gone)."""

    fire_at: Time
    outcome: FireOutcome | None
    run_id: str | None
    run_status: RunStatus | None


class CronDetails(Cron):
    """A schedule with its latest run, its next fire times and its latest occurrences."""

    last_execution: Annotated[
        LastExecution | None,
        pydantic.Field(description="The latest run the schedule started (null: none yet)."),
    ]
    next_fire_times: Annotated[
        list[ZonedTime],
        pydantic.Field(
            max_length=NEXT_TIMES,
            description="The expression's next fire times after now, in the schedule's zone "
            "and in UTC.",
        ),
    ]
    recent_fires: Annotated[
        list[CronFire],
        pydantic.Field(
            max_length=RECENT_FIRES, description="Its latest claimed occurrences, newest first."
        ),
    ]


class CronList(Shape):
    crons: list[Cron]
    next_cursor: Cursor


class CronTriggered(CronFire):
    """The occurrence a trigger claimed, and its schedule."""

    cron_id: str
