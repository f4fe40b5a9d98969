"""A workflow run and what is recorded about it: its status, checkpoints, questions, events.

Plain values, as the store returns them; the engine and the store both use them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_INPUT = "waiting_input"
    # Asleep in ``ctx.sleep`` until ``Run.wake_at``: stored as queued with that wake time,
    # so any worker claims it when it is due.
    SLEEPING = "sleeping"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class Run:
    """A workflow run as the store has it; ``result``, ``error`` and ``state`` are JSON data."""

    run_id: str
    workflow_id: str
    status: RunStatus
    input: Any
    result: Any
    error: Any
    state: dict[str, Any]
    user_id: str | None
    job_id: str | None
    cron_id: str | None
    concurrency_key: str | None
    idempotency_key: str | None
    attempts: int  # failed attempts retried so far
    executions: int  # times a worker (or caller) started executing it
    max_retries: int
    timeout_secs: float | None
    errors: list[Any]
    cancel_requested: bool
    holder: str | None
    lease_expires_at: float | None
    created_at: float
    updated_at: float
    finished_at: float | None
    wake_at: float | None = None  # when a sleeping run wakes (the database's clock)
    recv_topic: str | None = None  # the topic a run waiting in ``ctx.recv`` wants
    parent_run_id: str | None = None  # the run whose ``ctx.start_child`` started this one
    version: str = "1"  # the version of its workflow that started it
    forked_from: str | None = None  # the run this one was forked from (``app.fork_run``)
    forked_step: int | None = None  # and the step it executes from (those before are copies)
    queue_name: str | None = None  # the named queue it was submitted to (app.queue)
    priority: int = 0  # within its queue, lower runs first
    dedupe_id: str | None = None  # unique among its queue's active runs
    # Not stored: True on the Run that the call which created it returned (``submit_run``,
    # ``run_workflow``); False when the call found the run made before (the same
    # idempotency key or run id) and on every read.
    created: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class Step:
    """One task call's checkpoint: what was called, what it returned (or how it failed)."""

    position: int
    name: str
    args_hash: str
    ok: bool
    result: Any
    changes: list[tuple[str, Any]]
    attempts: int
    started_at: float
    finished_at: float


@dataclass(frozen=True, slots=True)
class Interrupt:
    """A question a run asked (``prompt``, ``schema``) and the answer given, if any."""

    key: str
    prompt: str | None
    schema: dict[str, Any] | None
    value: Any
    supplied: bool
    answered: bool
    error: Any
    asked_at: float | None
    answered_at: float | None


@dataclass(frozen=True, slots=True)
class RunEvent:
    seq: int
    kind: str
    data: Any
    created_at: float


@dataclass(frozen=True, slots=True)
class RunBacklog:
    """The runs not finished: how many of each open status (``queued``, ``running``,
    ``waiting_input``, ``sleeping``), and when the oldest queued one became claimable (None:
    none queued)."""

    counts: dict[str, int]
    oldest_queued_at: float | None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One step of a run, and the run's state after it.

    ``kind`` is ``task`` or the built-in call (``sleep``, ``wait_until``, ``recv_timeout``,
    ``recv``, ``set_event``); ``name`` is the task's name (``longcall.<kind>`` for the others).
    Only a hash of the call's arguments is recorded, not the arguments. ``output`` is what a
    step that succeeded returned (JSON data); ``error`` how a failed one failed.

    ``state`` holds the persisted state fields as the tasks up to and including this one
    left them (the workflow's reducers applied to each task's recorded changes); changes made
    by the workflow body itself, between tasks, are not recorded per step and do not show
    here (the run's final ``state`` has them). None when the workflow is not registered in
    this app, whose reducers the changes need.
    """

    step: int
    kind: str
    name: str
    args_hash: str
    ok: bool
    output: Any
    error: Any
    attempts: int
    started_at: float
    finished_at: float
    changes: list[tuple[str, Any]]
    state: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class RunVersion:
    """One version of one workflow and its runs not finished, by open status (``queued``,
    ``running``, ``waiting_input``, ``sleeping``): ``app.run_versions()``. A version with
    no such runs left has drained: its workers can go."""

    workflow_id: str
    version: str
    counts: dict[str, int]
    oldest_created_at: float

    @property
    def active(self) -> int:
        """Its runs not finished, whatever their status."""
        return sum(self.counts.values())
