"""The jobs part of the OpenAPI document: health and metrics, ``/v1/jobs`` and its event
streams, session transcripts, and the signed webhook deliveries."""

from __future__ import annotations

from typing import Any

import pydantic

from longcall.core.jobs import Delivery, JobState
from longcall.server import hooks, jobs
from longcall.server.checks import param_schema
from longcall.server.spec_common import (
    ANY,
    AUTH,
    EVENT_LOG,
    NULLABLE_TIME,
    PAGE,
    READ_ERRORS,
    SSE,
    TIME,
    WRITE_ERRORS,
    body,
    errors,
    json_answer,
    page_of,
    path_id,
    query,
    ref,
)

STATES = [s.value for s in JobState]
DELIVERIES = [d.value for d in Delivery]
JOB_ID = path_id("jobId", example="export:csv")

SCHEMAS: dict[str, Any] = {
    "Job": {
        "type": "object",
        "required": ["jobId", "toolName", "state", "delivery", "args", "createdAt"],
        "properties": {
            "jobId": {"type": "string"},
            "toolName": {"type": "string"},
            "state": {"enum": STATES},
            "delivery": {"enum": DELIVERIES},
            "args": {"type": "object"},
            "result": ANY,
            "progress": ANY,
            **{
                name: {"type": ["string", "null"]}
                for name in (
                    "appName",
                    "userId",
                    "sessionId",
                    "callId",
                    "invocationId",
                    "pendingMessage",
                    "lastError",
                )
            },
            **{
                name: NULLABLE_TIME
                for name in ("deadlineAt", "updatedAt", "finishedAt", "deliveredAt")
            },
            "pendingFields": {"type": ["object", "null"]},
            "createdAt": TIME,
            "deliveryAttempts": {"type": "integer", "minimum": 0},
        },
    },
    "JobList": page_of("jobs", "Job"),
    "Changed": {
        "type": "object",
        "required": ["changed", "job"],
        "properties": {"changed": {"type": "boolean"}, "job": ref("Job")},
    },
    "Transcript": {
        "type": "object",
        "required": ["sessionId", "userId", "events"],
        "properties": {
            "sessionId": {"type": "string"},
            "userId": {"type": "string"},
            "events": {"type": "array", "items": {"type": "object"}},
        },
    },
    "HookAnswer": {
        "type": "object",
        "required": ["outcome", "jobId"],
        "properties": {
            "outcome": {"enum": ["applied", "unchanged", "duplicate", "early", "unknown_job"]},
            "jobId": {"type": "string"},
        },
    },
}


def _action(summary: str, model: type[pydantic.BaseModel], *more_errors: int) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "security": AUTH,
            "parameters": [JOB_ID],
            "requestBody": body(model),
            "responses": {
                "200": json_answer(ref("Changed"), "Whether it changed the job; the job after."),
                **errors(*WRITE_ERRORS, *more_errors),
            },
        }
    }


def paths() -> dict[str, Any]:
    return {
        "/healthz": {
            "get": {
                "summary": "The process is up.",
                "responses": {"200": json_answer({"type": "object"}, "Up.")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "The store answers and its schema is current.",
                "responses": {
                    "200": json_answer({"type": "object"}, "Ready."),
                    "503": json_answer({"type": "object"}, "Not ready, with `reasons`."),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics: jobs by state, deliveries, webhook outcomes.",
                "responses": {
                    "200": {"description": "Prometheus text.", "content": {"text/plain": {}}},
                    **errors(503),
                },
            }
        },
        "/v1/jobs": {
            "get": {
                "summary": "Jobs the caller may see, newest first.",
                "security": AUTH,
                "parameters": [
                    query("state", "Only jobs in this state.", {"enum": STATES}),
                    query("tool", "Only jobs of this tool.", {"type": "string"}),
                    query("session", "Only jobs of this session.", {"type": "string"}),
                    query(
                        "q",
                        "Only jobs whose id, tool, session, user, call id or arguments contain "
                        "this text (in any case of ASCII letters).",
                        {"type": "string", "maxLength": jobs.MAX_SEARCH},
                    ),
                    *PAGE,
                ],
                "responses": {
                    "200": json_answer(ref("JobList"), "A page of jobs."),
                    **errors(401, 422, 503),
                },
            },
            "post": {
                "summary": "Create a job for a tool that runs outside Python (idempotent).",
                "description": "Its work runs outside Python: cancelling it or its deadline "
                "passing calls no `on_cancel` hook (unless the server's App registers a tool "
                "of that name with one).",
                "security": AUTH,
                "requestBody": body(jobs.CreateJob),
                "responses": {
                    "201": json_answer(ref("Job"), "Created."),
                    "200": json_answer(ref("Job"), "It existed: the job as it is."),
                    **errors(400, 401, 404, 409, 413, 415, 422, 503),
                },
            },
        },
        "/v1/jobs/{jobId}": {
            "get": {
                "summary": "One job.",
                "security": AUTH,
                "parameters": [JOB_ID],
                "responses": {
                    "200": json_answer(ref("Job"), "The job."),
                    **errors(*READ_ERRORS),
                },
            }
        },
        "/v1/jobs/{jobId}/events": {
            "get": {
                "summary": "The job's event log; live with Accept: text/event-stream.",
                "description": "As a stream: `event: job` messages carry the job, `event: "
                "event` messages a log entry with `id:` its seq; reconnect with Last-Event-ID.",
                "security": AUTH,
                "parameters": [JOB_ID],
                "responses": {"200": EVENT_LOG, **errors(*READ_ERRORS, 422)},
            }
        },
        "/v1/jobs/{jobId}/complete": _action(
            "Complete the job (first result wins; at or after its deadline the result is "
            "late: recorded, `changed` false, the job expired).",
            jobs.Complete,
        ),
        "/v1/jobs/{jobId}/fail": _action("Fail the job (late past its deadline).", jobs.Fail),
        "/v1/jobs/{jobId}/cancel": _action("Cancel the job (late past its deadline).", jobs.Cancel),
        "/v1/jobs/{jobId}/progress": _action("Report progress.", jobs.Progress),
        "/v1/jobs/{jobId}/attach": _action(
            "Attach the job to its agent session and call.", jobs.Attach, 409
        ),
        "/v1/jobs/{jobId}/extend": _action("Set a new deadline, from now.", jobs.Extend),
        "/v1/jobs/{jobId}/redeliver": _action(
            "Deliver an orphaned or failed job's response again, once its cause is fixed "
            "(attempts reset; the error stays in the event log). Any other delivery: 409.",
            jobs.Redeliver,
            409,
        ),
        "/v1/events": {
            "get": {
                "summary": "A stream of every change to a job the caller may see.",
                "description": "Server-sent events: `event: job`, the whole job as data, "
                "`id:` a cursor; reconnect with Last-Event-ID.",
                "security": AUTH,
                "parameters": [
                    query("session", "Only jobs of this session.", {"type": "string"}),
                    query("tool", "Only jobs of this tool.", {"type": "string"}),
                ],
                "responses": {
                    "200": {"description": "The stream.", "content": SSE},
                    **errors(401, 422, 503),
                },
            }
        },
        "/v1/sessions/{sessionId}/transcript": {
            "get": {
                "summary": "The conversation of the caller's session (user, sessionId), once "
                "the caller has a job in it; another user's session of that id is a 404.",
                "security": AUTH,
                "parameters": [
                    path_id("sessionId"),
                    query(
                        "user",
                        "admin tokens only: whose session to read (default: the user of the "
                        "session's newest job); ignored for a user's token",
                        {"type": "string"},
                    ),
                ],
                "responses": {
                    "200": json_answer(ref("Transcript"), "Its events, in order."),
                    **errors(*READ_ERRORS),
                },
            }
        },
        "/v1/hooks/{source}": {
            "post": {
                "summary": "A signed delivery from outside (Standard Webhooks).",
                "description": "Signed with webhook-id, webhook-timestamp and "
                "webhook-signature headers. Every verified delivery is answered 2xx: "
                "duplicates, late results and unknown jobs too. A result at or after the "
                "job's deadline is `unchanged`: recorded as late, the job expired.",
                "parameters": [
                    path_id("source"),
                    {
                        "name": "webhook-id",
                        "in": "header",
                        "description": "The sender's id for the event (UTF-8); the "
                        "signature and timestamp headers go beside it.",
                        "schema": param_schema("webhook_id"),
                    },
                ],
                "requestBody": body(hooks.Delivery),
                "responses": {
                    "200": json_answer(ref("HookAnswer"), "Recorded (see `outcome`)."),
                    "202": json_answer(ref("HookAnswer"), "Kept for a job not created yet."),
                    **errors(400, 401, 413, 415, 422, 503),
                },
            }
        },
    }
