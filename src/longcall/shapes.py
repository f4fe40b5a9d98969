"""How longcall's records look as JSON, the same over REST and on the CLI: camelCase keys and
ISO 8601 times in UTC, so the output of one can be piped into the other.

Each shape is a pydantic model named as the API names it (``Job``, ``Run``, ``Cron``, …; the
records they show are ``longcall.core.jobs.Job`` and the like). The server's answers and its
OpenAPI document are made from these models, so what is sent and what is documented cannot
differ; the ``*_json`` functions give the CLI (and the handlers) the dumped dictionaries.

Pure functions of the value types; nothing here does I/O or needs the server extra.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, overload
from zoneinfo import ZoneInfo

import pydantic
from pydantic.alias_generators import to_camel

from longcall.core import cron as crons
from longcall.core import jobs, runs

Time = Annotated[str, pydantic.WithJsonSchema({"type": "string", "format": "date-time"})]
"""An ISO 8601 time (:func:`iso` writes them in UTC)."""


class Shape(pydantic.BaseModel):
    """A JSON shape: camelCase keys (the field names in Python are snake_case)."""

    model_config = pydantic.ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def dumped(self) -> dict[str, Any]:
        """The shape as JSON data, keys in the order the fields are declared."""
        return self.model_dump(mode="json", by_alias=True)


@overload
def iso(when: float) -> str: ...
@overload
def iso(when: float | None) -> str | None: ...
def iso(when: float | None) -> str | None:
    """An epoch time as ISO 8601 in UTC (``2026-12-02T17:40:43.905049+00:00``)."""
    return None if when is None else dt.datetime.fromtimestamp(when, dt.UTC).isoformat()


class ZonedTime(Shape):
    local: Time
    utc: Time


def zoned(times: list[float], timezone: str) -> list[ZonedTime]:
    """Epoch times as ISO 8601 in ``timezone`` (``local``) and in UTC (``utc``)."""
    zone = ZoneInfo(timezone)
    return [
        ZonedTime(local=dt.datetime.fromtimestamp(at, zone).isoformat(), utc=iso(at))
        for at in times
    ]


def zoned_times(times: list[float], timezone: str) -> list[dict[str, str]]:
    """:func:`zoned`, as JSON data."""
    return [t.dumped() for t in zoned(times, timezone)]


class Job(Shape):
    """A job."""

    job_id: str
    tool_name: str
    state: jobs.JobState
    delivery: jobs.Delivery
    args: dict[str, Any]
    result: Any
    progress: Any
    app_name: str | None
    user_id: str | None
    session_id: str | None
    call_id: str | None
    invocation_id: str | None
    pending_message: str | None
    pending_fields: dict[str, Any] | None
    deadline_at: Time | None
    created_at: Time
    updated_at: Time
    finished_at: Time | None
    delivered_at: Time | None
    delivery_attempts: Annotated[int, pydantic.Field(ge=0)]
    last_error: str | None

    @classmethod
    def of(cls, job: jobs.Job) -> Job:
        return cls(
            job_id=job.job_id,
            tool_name=job.tool_name,
            state=job.state,
            delivery=job.delivery,
            args=job.args,
            result=job.result,
            progress=job.progress,
            app_name=job.app_name,
            user_id=job.user_id,
            session_id=job.session_id,
            call_id=job.call_id,
            invocation_id=job.invocation_id,
            pending_message=job.pending_message,
            pending_fields=job.pending_fields,
            deadline_at=iso(job.deadline_at),
            created_at=iso(job.created_at),
            updated_at=iso(job.updated_at),
            finished_at=iso(job.finished_at),
            delivered_at=iso(job.delivered_at),
            delivery_attempts=job.attempts,
            last_error=job.last_error,
        )


def job_json(job: jobs.Job) -> dict[str, Any]:
    """A job, as JSON data."""
    return Job.of(job).dumped()


class Event(Shape):
    """An entry of a job's or a run's event log."""

    seq: int
    kind: str
    data: Any
    created_at: Time

    @classmethod
    def of(cls, event: jobs.JobEvent | runs.RunEvent) -> Event:
        return cls(
            seq=event.seq, kind=event.kind, data=event.data, created_at=iso(event.created_at)
        )


def event_json(event: jobs.JobEvent | runs.RunEvent) -> dict[str, Any]:
    """An entry of a job's or a run's event log, as JSON data."""
    return Event.of(event).dumped()


class Run(Shape):
    """A background or in-process workflow run."""

    run_id: str
    workflow_id: str
    status: runs.RunStatus
    input: Any
    result: Any
    error: Any
    errors: Annotated[
        list[Any], pydantic.Field(description="Every failed attempt's error, oldest first.")
    ]
    retry_count: Annotated[int, pydantic.Field(ge=0)]
    retries_remaining: Annotated[int, pydantic.Field(ge=0)]
    max_retries: Annotated[int, pydantic.Field(ge=0)]
    timeout_secs: float | None
    cancel_requested: bool
    user_id: str | None
    created_at: Time
    updated_at: Time
    finished_at: Time | None
    wake_at: Annotated[
        Time | None,
        pydantic.Field(description="When a sleeping run (``ctx.sleep``) wakes; else null."),
    ] = None
    recv_topic: Annotated[
        str | None,
        pydantic.Field(description="The topic a run waiting in ``ctx.recv`` waits for."),
    ] = None
    parent_run_id: Annotated[
        str | None,
        pydantic.Field(description="The run whose ``ctx.start_child`` started this one."),
    ] = None
    version: Annotated[
        str,
        pydantic.Field(description="The version of its workflow that started the run."),
    ] = "1"
    forked_from: Annotated[
        str | None,
        pydantic.Field(description="The run this one was forked from (``app.fork_run``)."),
    ] = None
    forked_step: Annotated[
        int | None,
        pydantic.Field(description="The step a fork executes from; the ones before are copies."),
    ] = None
    queue: Annotated[
        str | None, pydantic.Field(description="The named queue it was submitted to.")
    ] = None
    priority: Annotated[int, pydantic.Field(description="Within its queue, lower first.")] = 0
    dedupe_id: Annotated[
        str | None,
        pydantic.Field(description="Unique among its queue's active runs."),
    ] = None

    @classmethod
    def of(cls, run: runs.Run) -> Run:
        return cls(
            run_id=run.run_id,
            workflow_id=run.workflow_id,
            status=run.status,
            input=run.input,
            result=run.result,
            error=run.error,
            errors=run.errors,
            retry_count=run.attempts,
            retries_remaining=max(0, run.max_retries - run.attempts),
            max_retries=run.max_retries,
            timeout_secs=run.timeout_secs,
            cancel_requested=run.cancel_requested,
            user_id=run.user_id,
            created_at=iso(run.created_at),
            updated_at=iso(run.updated_at),
            finished_at=iso(run.finished_at),
            wake_at=iso(run.wake_at),
            recv_topic=run.recv_topic,
            parent_run_id=run.parent_run_id,
            version=run.version,
            forked_from=run.forked_from,
            forked_step=run.forked_step,
            queue=run.queue_name,
            priority=run.priority,
            dedupe_id=run.dedupe_id,
        )


def run_json(run: runs.Run) -> dict[str, Any]:
    """A background or in-process workflow run, as JSON data."""
    return Run.of(run).dumped()


class PendingInterrupt(Shape):
    """A question a run asked (or will ask), with the JSON schema of its answer."""

    key: Annotated[str, pydantic.Field(description="interrupt-1, interrupt-2, …")]
    prompt: str | None
    # Not ``schema``: that name is taken by pydantic's BaseModel.
    answer_schema: Annotated[
        dict[str, Any] | None,
        pydantic.Field(
            alias="schema", description="The JSON schema an answer must fit (null: anything)."
        ),
    ]
    error: Annotated[
        Any, pydantic.Field(description="Why the last answer was refused when the run checked it.")
    ]

    @classmethod
    def of(cls, interrupt: runs.Interrupt) -> PendingInterrupt:
        return cls(
            key=interrupt.key,
            prompt=interrupt.prompt,
            answer_schema=interrupt.schema,
            error=interrupt.error,
        )


def interrupt_json(interrupt: runs.Interrupt) -> dict[str, Any]:
    """A question a run asked (or will ask), as JSON data."""
    return PendingInterrupt.of(interrupt).dumped()


class Step(Shape):
    """A task call's checkpoint."""

    position: int
    name: str
    ok: bool
    result: Any
    attempts: int
    started_at: Time
    finished_at: Time

    @classmethod
    def of(cls, step: runs.Step) -> Step:
        return cls(
            position=step.position,
            name=step.name,
            ok=step.ok,
            result=step.result,
            attempts=step.attempts,
            started_at=iso(step.started_at),
            finished_at=iso(step.finished_at),
        )


def step_json(step: runs.Step) -> dict[str, Any]:
    """A task call's checkpoint, as JSON data."""
    return Step.of(step).dumped()


class HistoryStep(Shape):
    """One step of a run (``app.run_history``): its checkpoint and the state after it."""

    step: Annotated[int, pydantic.Field(ge=1, description="The step's number: fork from it.")]
    kind: Annotated[
        str,
        pydantic.Field(
            description="task, or the built-in call: sleep, wait_until, recv_timeout, recv, "
            "set_event."
        ),
    ]
    name: str
    args_hash: str
    ok: bool
    output: Any
    error: Any
    attempts: int
    started_at: Time
    finished_at: Time
    state: Annotated[
        dict[str, Any] | None,
        pydantic.Field(
            description="The persisted state fields after this step, as the tasks left them "
            "(null where the workflow is not registered)."
        ),
    ]

    @classmethod
    def of(cls, entry: runs.HistoryEntry) -> HistoryStep:
        return cls(
            step=entry.step,
            kind=entry.kind,
            name=entry.name,
            args_hash=entry.args_hash,
            ok=entry.ok,
            output=entry.output,
            error=entry.error,
            attempts=entry.attempts,
            started_at=iso(entry.started_at),
            finished_at=iso(entry.finished_at),
            state=entry.state,
        )


def history_json(entry: runs.HistoryEntry) -> dict[str, Any]:
    """One step of a run's history, as JSON data."""
    return HistoryStep.of(entry).dumped()


Count = Annotated[int, pydantic.Field(ge=0)]


class Cron(Shape):
    """A cron schedule and how many of its runs are active."""

    cron_id: str
    name: str
    workflow_id: str
    cron_expression: str
    timezone: Annotated[str, pydantic.Field(description="An IANA time zone name.")]
    input: Any
    concurrency_policy: crons.ConcurrencyPolicy
    misfire_policy: crons.MisfirePolicy
    catch_up_max: Count
    paused: bool
    next_fire_at: Annotated[
        Time | None, pydantic.Field(description="The next occurrence to fire (null: none to come).")
    ]
    last_fire_at: Annotated[
        Time | None,
        pydantic.Field(description="The occurrence of the latest run the schedule started."),
    ]
    execution_count: Annotated[
        Count, pydantic.Field(description="Runs the schedule started (fired and triggered).")
    ]
    active_run_count: Annotated[
        Count, pydantic.Field(description="Its runs that are queued, running or waiting for input.")
    ]
    user_id: str | None
    created_at: Time
    updated_at: Time
    queue: Annotated[
        str | None, pydantic.Field(description="The named queue its runs are submitted to.")
    ] = None

    @classmethod
    def of(cls, cron: crons.Cron, active_runs: int) -> Cron:
        return cls(
            cron_id=cron.cron_id,
            name=cron.name,
            workflow_id=cron.workflow_id,
            cron_expression=cron.expression,
            timezone=cron.timezone,
            input=cron.input,
            concurrency_policy=cron.concurrency_policy,
            misfire_policy=cron.misfire_policy,
            catch_up_max=cron.catch_up_max,
            paused=cron.paused,
            next_fire_at=iso(cron.next_fire_at),
            last_fire_at=iso(cron.last_fire_at),
            execution_count=cron.execution_count,
            active_run_count=active_runs,
            user_id=cron.user_id,
            created_at=iso(cron.created_at),
            updated_at=iso(cron.updated_at),
            queue=cron.queue,
        )


def cron_json(cron: crons.Cron, active_runs: int) -> dict[str, Any]:
    """A cron schedule and how many of its runs are active, as JSON data."""
    return Cron.of(cron, active_runs).dumped()


class CronFire(Shape):
    """A claimed occurrence of a schedule and what became of it."""

    fire_at: Time
    outcome: crons.FireOutcome
    run_id: str | None
    created_at: Time

    @classmethod
    def of(cls, fire: crons.CronFire) -> CronFire:
        return cls(
            fire_at=iso(fire.fire_at),
            outcome=fire.outcome,
            run_id=fire.run_id,
            created_at=iso(fire.created_at),
        )


def fire_json(fire: crons.CronFire) -> dict[str, Any]:
    """A claimed occurrence of a schedule and what became of it, as JSON data."""
    return CronFire.of(fire).dumped()
