"""The keyword options of the App's pass-through methods, as types a checker can hold calls to.

``app.list_jobs(**filters)``, ``app.run_worker(**options)`` and the like hand their keywords
on to the store or the loop they build, which checks them at runtime as before; these
``TypedDict``s only let mypy (or pyright) report a misspelt option or a value of the wrong type
where the call is written. Each mirrors the keyword parameters of the function it feeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from longcall.agents import AgentEvent
    from longcall.core.jobs import Delivery, Job, JobState
    from longcall.core.retention import Retention


class JobFilters(TypedDict, total=False):
    """``app.list_jobs`` (see :meth:`Store.list_jobs`)."""

    state: JobState | None
    tool_name: str | None
    session_id: str | None
    user_id: str | None
    delivery: Delivery | None
    text: str | None
    before: tuple[float, str] | None
    limit: int


class RunWorkerOptions(TypedDict, total=False):
    """``app.run_worker`` (see :class:`~longcall.workflows.run_worker.RunWorker`)."""

    concurrency: int
    poll_interval: str | float
    grace: str | float
    claim_delay: str | float
    wake_ahead: str | float
    holder: str | None
    queues: Sequence[str] | None


class SweeperOptions(TypedDict, total=False):
    """``app.sweeper`` (see :class:`~longcall.jobs.sweeper.Sweeper`)."""

    batch: int
    interval: str | float


class _DeliveryOptions(TypedDict, total=False):
    batch: int
    lease: str | float
    max_attempts: int
    retry_base: str | float
    retry_cap: str | float
    poll_interval: str | float
    holder: str | None
    on_event: Callable[[Job, AgentEvent], None] | None


class DelivererOptions(_DeliveryOptions, total=False):
    """``app.deliverer`` (see :class:`~longcall.jobs.delivery.Deliverer`)."""

    deliveries: int


class WorkerOptions(_DeliveryOptions, total=False):
    """``app.worker``: the worker's own options (see :class:`~longcall.worker.Worker`) and
    its deliverers' (``deliveries`` is the worker's, passed on to each)."""

    runs: bool | None
    run_concurrency: int
    run_queues: Sequence[str] | None
    deliveries: int
    sweep_interval: str | float
    dispatch_interval: str | float
    drain_timeout: str | float
    retention: Retention | None
