"""A longcall job as an MCP task: the wire shapes of the tasks extension (SEP-2663).

Pure functions from a :class:`~longcall.core.jobs.Job` to the JSON the extension defines,
so the shape is tested without a server. The task id is the job id: the job row is the
only record of the task, and any process that reads the store can answer for it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from longcall.core.jobs import Job, JobState

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 1000  # a hint to clients; completions come from outside at any time

# longcall's job states as task statuses. An expired job failed: its deadline answered.
STATUS_OF_STATE = {
    JobState.STARTED: "working",
    JobState.SUCCEEDED: "completed",
    JobState.FAILED: "failed",
    JobState.EXPIRED: "failed",
    JobState.CANCELLED: "cancelled",
}
INTERNAL_ERROR = -32603  # JSON-RPC's code; the task's error object reuses its shape


def iso_time(seconds: float | None) -> str:
    return datetime.fromtimestamp(seconds or 0.0, UTC).isoformat()


def status_message(job: Job) -> str | None:
    """The job's latest progress as text (a string as it is, anything else as JSON); the
    tool's pending message before any progress; for a failed or cancelled job the reason."""
    if job.state in (JobState.FAILED, JobState.EXPIRED, JobState.CANCELLED):
        return _error_message(job)
    if job.progress is not None:
        if isinstance(job.progress, str):
            return job.progress
        return json.dumps(job.progress, sort_keys=True)
    return job.pending_message


def _error_message(job: Job) -> str:
    body = job.result
    if isinstance(body, dict):
        for name in ("message", "error", "reason"):
            if isinstance(body.get(name), str) and body[name]:
                return str(body[name])
    if isinstance(body, str) and body:
        return body
    return f"the job {job.state.value}"


def task_of(job: Job) -> dict[str, Any]:
    """The task fields every task result carries (``Task`` in SEP-2663), camelCase."""
    task: dict[str, Any] = {
        "taskId": job.job_id,
        "status": STATUS_OF_STATE[job.state],
        "createdAt": iso_time(job.created_at),
        "lastUpdatedAt": iso_time(job.updated_at),
        # The job row stays until `longcall prune` removes it: no expiry the server knows.
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    message = status_message(job)
    if message is not None:
        task["statusMessage"] = message
    return task


def created_result(job: Job) -> dict[str, Any]:
    """The ``tools/call`` answer that hands the client its task (``resultType: task``)."""
    return {"resultType": "task", **task_of(job)}


def call_tool_result(result: Any) -> dict[str, Any]:
    """A job's result as the ``CallToolResult`` the tool call would have returned: JSON text,
    and the same value as structured content (wrapped in ``result`` unless an object)."""
    structured = result if isinstance(result, dict) else {"result": result}
    text = json.dumps(result, sort_keys=True)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }


def detailed_task(job: Job) -> dict[str, Any]:
    """The ``tasks/get`` answer: the task, with the result inlined once it completed and an
    error object once it failed (SEP-2663 merged ``tasks/result`` into ``tasks/get``)."""
    detailed: dict[str, Any] = {"resultType": "complete", **task_of(job)}
    if job.state is JobState.SUCCEEDED:
        detailed["result"] = call_tool_result(job.result)
    elif job.state in (JobState.FAILED, JobState.EXPIRED):
        detailed["error"] = {
            "code": INTERNAL_ERROR,
            "message": _error_message(job),
            "data": {"state": job.state.value, "result": job.result},
        }
    return detailed
