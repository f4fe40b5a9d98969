"""The spans of workflows: ``longcall.run`` for each execution of a run (up to its end or
its next interrupt) and ``longcall.task`` inside it for each task call that runs."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from longcall.core.runs import Run, RunStatus
from longcall.telemetry import (
    JOB_ID,
    RUN_ID,
    RUN_STATUS,
    TASK_NAME,
    TASK_POSITION,
    USER_ID,
    WORKFLOW_ID,
    Telemetry,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

SpanBlock = contextlib.AbstractContextManager["Span | None"]


def run_span(telemetry: Telemetry, run: Run) -> SpanBlock:
    """The ``longcall.run`` span of one execution of ``run``."""
    attributes = {
        RUN_ID: run.run_id,
        WORKFLOW_ID: run.workflow_id,
        USER_ID: run.user_id,
        JOB_ID: run.job_id,
        "longcall.run.execution": run.executions,
    }
    return telemetry.span("longcall.run", attributes)


def ended(
    telemetry: Telemetry, span: Span | None, outcome: tuple[RunStatus, Any, Any]
) -> tuple[RunStatus, Any, Any]:
    """``outcome`` (status, result, error), told to the run's span: a failed run is an error."""
    status, _, error = outcome
    telemetry.set(span, RUN_STATUS, status.value)
    if status is RunStatus.FAILED:
        message = error.get("message") if isinstance(error, dict) else None
        telemetry.failed(str(message or error), span)
    return outcome


def task_span(telemetry: Telemetry, run_id: str, name: str, position: int) -> SpanBlock:
    """The ``longcall.task`` span of a task call that runs (its retries included)."""
    attributes = {RUN_ID: run_id, TASK_NAME: name, TASK_POSITION: position}
    return telemetry.span("longcall.task", attributes)
