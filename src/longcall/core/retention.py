"""How long finished work is kept: the retention periods the worker's pruner and
``longcall prune`` apply, one per kind of record.

A job is kept while it can still change or still has to reach its agent; a run while it is
not finished. After that, each kind is removed once it is older than its period. The webhook
inbox (the ids of deliveries already taken, which make a sender's retry a duplicate rather
than a second completion) is kept at least :data:`MIN_WEBHOOK_WINDOW`: Standard Webhooks
senders retry a failed delivery for days (Svix's schedule spans about 28 hours over eight
attempts), and a retry that arrives after its id was forgotten would complete nothing (its
job is finished) but would be stored again as an early result.
"""

from __future__ import annotations

from dataclasses import dataclass

from longcall.core.jobs import parse_duration

DAY = 86400.0
DEFAULT_PERIOD = 30 * DAY
MIN_WEBHOOK_WINDOW = 7 * DAY
FOREVER = "forever"

Period = str | float | None  # "30d", seconds, "forever" or None (forever)


def parse_period(value: Period, what: str) -> float | None:
    """Seconds from a period (``"30d"``, ``86400``), or None for ``"forever"`` / None."""
    if value is None or (isinstance(value, str) and value.strip().lower() == FOREVER):
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}, or 'forever'") from None
    if seconds <= 0:
        raise ValueError(f"{what}: a retention period must be longer than 0, not {value!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class Retention:
    """Seconds each kind of finished record is kept (None: forever).

    ``jobs``: finished and delivered jobs, with their event logs. ``runs``: finished runs,
    with their steps, interrupts and events. ``webhooks``: the webhook inbox and results
    that arrived for jobs never created; never shorter than :data:`MIN_WEBHOOK_WINDOW`.
    """

    jobs: float | None = DEFAULT_PERIOD
    runs: float | None = DEFAULT_PERIOD
    webhooks: float | None = DEFAULT_PERIOD

    @classmethod
    def of(
        cls,
        jobs: Period = DEFAULT_PERIOD,
        runs: Period = DEFAULT_PERIOD,
        webhooks: Period = DEFAULT_PERIOD,
    ) -> Retention:
        """Periods written as ``"30d"``, ``"12h"``, seconds, or ``"forever"``."""
        window = parse_period(webhooks, "webhooks")
        if window is not None and window < MIN_WEBHOOK_WINDOW:
            raise ValueError(
                f"webhooks: the inbox is kept at least {MIN_WEBHOOK_WINDOW / DAY:.0f} days"
                " (senders retry for days; a retry after its id is forgotten is stored again)"
            )
        return cls(parse_period(jobs, "jobs"), parse_period(runs, "runs"), window)

    @classmethod
    def forever(cls) -> Retention:
        """Keep everything (the pruner removes nothing)."""
        return cls(None, None, None)
