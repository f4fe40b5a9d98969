"""A cron schedule and its occurrences, as the store returns them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ConcurrencyPolicy(enum.StrEnum):
    """What an occurrence does while a run the schedule started is still active."""

    SKIP = "skip"  # start nothing (the occurrence is recorded as skipped)
    ALLOW = "allow"  # start a run beside it
    QUEUE = "queue"  # start a run that waits for the earlier ones (a shared concurrency key)


class MisfirePolicy(enum.StrEnum):
    """What happens to occurrences missed while the schedule was paused or no scheduler ran."""

    SKIP = "skip"  # drop them
    RUN_ONCE = "run_once"  # one run stands for all of them
    CATCH_UP = "catch_up"  # run the latest ``catch_up_max`` of them, oldest first


class FireOutcome(enum.StrEnum):
    """What a claimed occurrence did (see the module docstring)."""

    FIRED = "fired"
    SKIPPED = "skipped"
    TRIGGERED = "triggered"
    TRIGGER_SKIPPED = "trigger_skipped"

    @property
    def started(self) -> bool:
        """True when the occurrence started a run."""
        return self in (FireOutcome.FIRED, FireOutcome.TRIGGERED)


@dataclass(frozen=True, slots=True)
class Cron:
    """A schedule as the store has it; times are UTC epoch seconds."""

    cron_id: str
    name: str
    workflow_id: str
    expression: str
    timezone: str
    input: Any
    concurrency_policy: ConcurrencyPolicy
    misfire_policy: MisfirePolicy
    catch_up_max: int
    paused: bool
    next_fire_at: float | None  # None: no occurrence to come
    last_fire_at: float | None
    execution_count: int
    user_id: str | None
    created_at: float
    updated_at: float
    queue: str | None = None  # the named queue its runs are submitted to


@dataclass(frozen=True, slots=True)
class CronFire:
    """One claimed occurrence: what it did and the run it started, if any."""

    cron_id: str
    fire_at: float
    run_id: str | None
    outcome: FireOutcome
    created_at: float
