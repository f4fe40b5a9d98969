"""A workflow run as an MCP task: the wire shapes, as pure functions (tested without a server).

A run's open interrupts are the task's ``inputRequests`` (SEP-2663 on MCP 2026-07-28): each
an ``elicitation/create`` request in form mode, keyed by the interrupt's key
(``interrupt-1``…), with the prompt as the message and the interrupt's JSON schema as the
requested schema. Elicitation forms are flat objects, so a question whose schema is not an
object (``schema=bool``, or none) is asked as an object with one property, ``value``, and the
answer's ``value`` is what the run receives. The rule depends only on the stored schema, so
any server process translates an answer back the same way.
"""

from __future__ import annotations

from typing import Any

from longcall.core.runs import Interrupt, Run, RunStatus
from longcall.mcp.tasks import INTERNAL_ERROR, POLL_INTERVAL_MS, call_tool_result, iso_time

WRAPPED = "value"  # the one property of a form asking for a non-object answer

STATUS_OF_RUN = {
    RunStatus.QUEUED: "working",
    RunStatus.RUNNING: "working",
    RunStatus.SLEEPING: "working",
    RunStatus.WAITING_INPUT: "input_required",
    RunStatus.COMPLETED: "completed",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
}


def is_object_schema(schema: dict[str, Any] | None) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def requested_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The interrupt's schema as an elicitation form (wrapped unless it is an object)."""
    if schema is not None and is_object_schema(schema):
        return schema
    return {"type": "object", "properties": {WRAPPED: schema or {}}, "required": [WRAPPED]}


def answer_of(schema: dict[str, Any] | None, content: dict[str, Any]) -> Any:
    """The value the run receives for a form's accepted ``content``."""
    if is_object_schema(schema):
        return content
    if WRAPPED not in content:
        raise ValueError(f"the answer's content needs {WRAPPED!r} (the form's one property)")
    return content[WRAPPED]


def input_request(interrupt: Interrupt) -> dict[str, Any]:
    """One open interrupt as an ``elicitation/create`` input request."""
    message = interrupt.prompt or f"answer {interrupt.key}"
    if interrupt.error:
        # The run found the last answer of the wrong type and asks again: say why.
        message += f" (the last answer was refused: {_problems_text(interrupt.error)})"
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": requested_schema(interrupt.schema),
        },
    }


def _problems_text(error: Any) -> str:
    if isinstance(error, list):
        return "; ".join(str(p.get("message", p)) if isinstance(p, dict) else str(p) for p in error)
    return str(error)


def run_task(run: Run) -> dict[str, Any]:
    """The task fields of a run (``Task`` in SEP-2663); the task id is the run id."""
    task: dict[str, Any] = {
        "taskId": run.run_id,
        "status": STATUS_OF_RUN[run.status],
        "createdAt": iso_time(run.created_at),
        "lastUpdatedAt": iso_time(run.updated_at),
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    message = _status_message(run)
    if message is not None:
        task["statusMessage"] = message
    return task


def _status_message(run: Run) -> str | None:
    if run.status is RunStatus.FAILED:
        return _error_text(run)
    if run.status is RunStatus.CANCELLED:
        return "the run was cancelled"
    if run.status is RunStatus.SLEEPING:
        return "the run is sleeping"
    if run.status is RunStatus.WAITING_INPUT:
        return "the run waits for input"
    return None


def _error_text(run: Run) -> str:
    error = run.error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str) and error:
        return error
    return "the run failed"


def detailed_run_task(run: Run, interrupts: list[Interrupt]) -> dict[str, Any]:
    """The ``tasks/get`` answer for a run: ``inputRequests`` while it waits for input, the
    result once completed, an error object once failed."""
    detailed: dict[str, Any] = {"resultType": "complete", **run_task(run)}
    asking = open_interrupts(interrupts)
    if run.status is RunStatus.WAITING_INPUT and not asking:
        # Read between the run and its interrupts while an answer was taken: no question
        # is open, so the run is about to continue (input_required needs a request).
        detailed["status"] = "working"
        detailed.pop("statusMessage", None)
    elif run.status is RunStatus.WAITING_INPUT:
        detailed["inputRequests"] = {i.key: input_request(i) for i in asking}
    elif run.status is RunStatus.COMPLETED:
        detailed["result"] = call_tool_result(run.result)
    elif run.status is RunStatus.FAILED:
        detailed["error"] = {
            "code": INTERNAL_ERROR,
            "message": _error_text(run),
            "data": {"status": run.status.value, "error": run.error},
        }
    return detailed


def open_interrupts(interrupts: list[Interrupt]) -> list[Interrupt]:
    """The questions a waiting run waits on: asked and not answered."""
    return [i for i in interrupts if i.asked_at is not None and not i.answered]
