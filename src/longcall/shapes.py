"""How longcall's records look as JSON, the same over REST and on the CLI: camelCase keys and
ISO 8601 times in UTC, so the output of one can be piped into the other.

Pure functions of the value types; nothing here does I/O or needs the server extra.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from longcall.core.jobs import Job, JobEvent
from longcall.store.cron import Cron, CronFire
from longcall.store.runs import Interrupt, Run, RunEvent, Step


def iso(when: float | None) -> str | None:
    """An epoch time as ISO 8601 in UTC (``2026-12-02T17:40:43.905049+00:00``)."""
    return None if when is None else dt.datetime.fromtimestamp(when, dt.UTC).isoformat()


def zoned_times(times: list[float], timezone: str) -> list[dict[str, str]]:
    """Epoch times as ISO 8601 in ``timezone`` (``local``) and in UTC (``utc``)."""
    zone = ZoneInfo(timezone)
    return [
        {
            "local": dt.datetime.fromtimestamp(at, zone).isoformat(),
            "utc": dt.datetime.fromtimestamp(at, dt.UTC).isoformat(),
        }
        for at in times
    ]


def job_json(job: Job) -> dict[str, Any]:
    """A job."""
    return {
        "jobId": job.job_id,
        "toolName": job.tool_name,
        "state": job.state.value,
        "delivery": job.delivery.value,
        "args": job.args,
        "result": job.result,
        "progress": job.progress,
        "appName": job.app_name,
        "userId": job.user_id,
        "sessionId": job.session_id,
        "callId": job.call_id,
        "invocationId": job.invocation_id,
        "pendingMessage": job.pending_message,
        "pendingFields": job.pending_fields,
        "deadlineAt": iso(job.deadline_at),
        "createdAt": iso(job.created_at),
        "updatedAt": iso(job.updated_at),
        "finishedAt": iso(job.finished_at),
        "deliveredAt": iso(job.delivered_at),
        "deliveryAttempts": job.attempts,
        "lastError": job.last_error,
    }


def event_json(event: JobEvent | RunEvent) -> dict[str, Any]:
    """An entry of a job's or a run's event log."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "data": event.data,
        "createdAt": iso(event.created_at),
    }


def run_json(run: Run) -> dict[str, Any]:
    """A background or in-process workflow run."""
    return {
        "runId": run.run_id,
        "workflowId": run.workflow_id,
        "status": run.status.value,
        "input": run.input,
        "result": run.result,
        "error": run.error,
        "errors": run.errors,
        "retryCount": run.attempts,
        "retriesRemaining": max(0, run.max_retries - run.attempts),
        "maxRetries": run.max_retries,
        "timeoutSecs": run.timeout_secs,
        "cancelRequested": run.cancel_requested,
        "userId": run.user_id,
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.updated_at),
        "finishedAt": iso(run.finished_at),
    }


def interrupt_json(interrupt: Interrupt) -> dict[str, Any]:
    """A question a run asked (or will ask), with the JSON schema of its answer."""
    return {
        "key": interrupt.key,
        "prompt": interrupt.prompt,
        "schema": interrupt.schema,
        "error": interrupt.error,
    }


def step_json(step: Step) -> dict[str, Any]:
    """A task call's checkpoint."""
    return {
        "position": step.position,
        "name": step.name,
        "ok": step.ok,
        "result": step.result,
        "attempts": step.attempts,
        "startedAt": iso(step.started_at),
        "finishedAt": iso(step.finished_at),
    }


def cron_json(cron: Cron, active_runs: int) -> dict[str, Any]:
    """A cron schedule and how many of its runs are active."""
    return {
        "cronId": cron.cron_id,
        "name": cron.name,
        "workflowId": cron.workflow_id,
        "cronExpression": cron.expression,
        "timezone": cron.timezone,
        "input": cron.input,
        "concurrencyPolicy": cron.concurrency_policy.value,
        "misfirePolicy": cron.misfire_policy.value,
        "catchUpMax": cron.catch_up_max,
        "paused": cron.paused,
        "nextFireAt": iso(cron.next_fire_at),
        "lastFireAt": iso(cron.last_fire_at),
        "executionCount": cron.execution_count,
        "activeRunCount": active_runs,
        "userId": cron.user_id,
        "createdAt": iso(cron.created_at),
        "updatedAt": iso(cron.updated_at),
    }


def fire_json(fire: CronFire) -> dict[str, Any]:
    """A claimed occurrence of a schedule and what became of it."""
    return {
        "fireAt": iso(fire.fire_at),
        "outcome": fire.outcome.value,
        "runId": fire.run_id,
        "createdAt": iso(fire.created_at),
    }
