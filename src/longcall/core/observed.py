"""What the engines tell as work happens, for whoever listens (the metrics).

Each is a fact about this process's own work, told once, in the thread that did it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TaskDone:
    """A task of a run returned (``ok``) or raised, after ``seconds`` (this attempt)."""

    workflow_id: str
    task: str
    seconds: float
    ok: bool


@dataclass(frozen=True, slots=True)
class RunEnded:
    """An execution of a run ended: ``completed``, ``failed``, ``cancelled``, or ``retrying``
    (it failed and goes back to the queue for another attempt)."""

    workflow_id: str
    status: str


@dataclass(frozen=True, slots=True)
class CronFired:
    """A schedule's occurrence was claimed here; ``outcome`` says what it did."""

    outcome: str


@dataclass(frozen=True, slots=True)
class CronMisfired:
    """A schedule found occurrences older than the misfire grace; ``policy`` says what it
    did with them (``skip``, ``run_once``, ``catch_up``)."""

    policy: str


Observed = TaskDone | RunEnded | CronFired | CronMisfired
