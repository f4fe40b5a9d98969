"""``/openapi.json`` and ``/docs``: the HTTP API described once, from the models it validates.

Request bodies come from the pydantic models the handlers use, so the spec cannot drift from
what is accepted; responses are written out here and checked against the running server by
the schemathesis test. ``/docs`` renders the same document as one HTML page, served by the
app itself (no files from a CDN).
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.metadata import version
from typing import Any

import pydantic
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from longcall.jobs import Delivery, JobState
from longcall.server import cron, hooks, jobs, runs
from longcall.store.cron import ConcurrencyPolicy, FireOutcome, MisfirePolicy
from longcall.store.runs import RunStatus

STATES = [s.value for s in JobState]
RUN_STATUSES = [s.value for s in RunStatus]
DELIVERIES = [d.value for d in Delivery]
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
ANY: dict[str, Any] = {}  # any JSON value

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "field"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "field": {"type": ["string", "null"]},
                },
            }
        },
    },
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
            "createdAt": {"type": "string", "format": "date-time"},
            "deliveryAttempts": {"type": "integer", "minimum": 0},
        },
    },
    "JobList": {
        "type": "object",
        "required": ["jobs", "nextCursor"],
        "properties": {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "nextCursor": {"type": ["string", "null"]},
        },
    },
    "Changed": {
        "type": "object",
        "required": ["changed", "job"],
        "properties": {"changed": {"type": "boolean"}, "job": {"$ref": "#/components/schemas/Job"}},
    },
    "JobEvent": {
        "type": "object",
        "required": ["seq", "kind", "data", "createdAt"],
        "properties": {
            "seq": {"type": "integer"},
            "kind": {"type": "string"},
            "data": ANY,
            "createdAt": {"type": "string", "format": "date-time"},
        },
    },
    "JobEvents": {
        "type": "object",
        "required": ["events"],
        "properties": {
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}}
        },
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
    "Run": {
        "type": "object",
        "required": [
            "runId",
            "workflowId",
            "status",
            "input",
            "result",
            "error",
            "errors",
            "retryCount",
            "retriesRemaining",
            "cancelRequested",
            "createdAt",
            "updatedAt",
        ],
        "properties": {
            "runId": {"type": "string"},
            "workflowId": {"type": "string"},
            "status": {"enum": RUN_STATUSES},
            "input": ANY,
            "result": ANY,
            "error": {"type": ["object", "null"]},
            "errors": {
                "type": "array",
                "items": {"type": "object"},
                "description": "Every failed attempt's error, oldest first.",
            },
            "retryCount": {"type": "integer", "minimum": 0},
            "retriesRemaining": {"type": "integer", "minimum": 0},
            "maxRetries": {"type": "integer", "minimum": 0},
            "timeoutSecs": {"type": ["number", "null"]},
            "cancelRequested": {"type": "boolean"},
            "userId": {"type": ["string", "null"]},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
            "finishedAt": NULLABLE_TIME,
        },
    },
    "RunDetails": {
        "allOf": [
            {"$ref": "#/components/schemas/Run"},
            {
                "type": "object",
                "required": ["pendingInterrupts", "steps"],
                "properties": {
                    "pendingInterrupts": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/PendingInterrupt"},
                    },
                    "steps": {"type": "array", "items": {"$ref": "#/components/schemas/Step"}},
                },
            },
        ]
    },
    "PendingInterrupt": {
        "type": "object",
        "required": ["key", "prompt", "schema", "error"],
        "properties": {
            "key": {"type": "string", "description": "interrupt-1, interrupt-2, …"},
            "prompt": {"type": ["string", "null"]},
            "schema": {
                "type": ["object", "null"],
                "description": "The JSON schema an answer must fit (null: anything).",
            },
            "error": {
                "type": ["array", "null"],
                "description": "Why the last answer was refused when the run checked it.",
            },
        },
    },
    "Step": {
        "type": "object",
        "required": ["position", "name", "ok", "result", "attempts", "startedAt", "finishedAt"],
        "properties": {
            "position": {"type": "integer"},
            "name": {"type": "string"},
            "ok": {"type": "boolean"},
            "result": ANY,
            "attempts": {"type": "integer"},
            "startedAt": {"type": "string", "format": "date-time"},
            "finishedAt": {"type": "string", "format": "date-time"},
        },
    },
    "RunList": {
        "type": "object",
        "required": ["runs", "nextCursor"],
        "properties": {
            "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}},
            "nextCursor": {"type": ["string", "null"]},
        },
    },
    "Cron": {
        "type": "object",
        "required": [
            "cronId",
            "name",
            "workflowId",
            "cronExpression",
            "timezone",
            "input",
            "concurrencyPolicy",
            "misfirePolicy",
            "catchUpMax",
            "paused",
            "nextFireAt",
            "lastFireAt",
            "executionCount",
            "activeRunCount",
            "createdAt",
        ],
        "properties": {
            "cronId": {"type": "string"},
            "name": {"type": "string"},
            "workflowId": {"type": "string"},
            "cronExpression": {"type": "string"},
            "timezone": {"type": "string", "description": "An IANA time zone name."},
            "input": ANY,
            "concurrencyPolicy": {"enum": [p.value for p in ConcurrencyPolicy]},
            "misfirePolicy": {"enum": [p.value for p in MisfirePolicy]},
            "catchUpMax": {"type": "integer", "minimum": 0},
            "paused": {"type": "boolean"},
            "nextFireAt": {
                **NULLABLE_TIME,
                "description": "The next occurrence to fire (null: none to come).",
            },
            "lastFireAt": {
                **NULLABLE_TIME,
                "description": "The occurrence of the latest run the schedule started.",
            },
            "executionCount": {
                "type": "integer",
                "minimum": 0,
                "description": "Runs the schedule started (fired and triggered).",
            },
            "activeRunCount": {
                "type": "integer",
                "minimum": 0,
                "description": "Its runs that are queued, running or waiting for input.",
            },
            "userId": {"type": ["string", "null"]},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
    },
    "CronFire": {
        "type": "object",
        "required": ["fireAt", "outcome", "runId", "createdAt"],
        "properties": {
            "fireAt": {"type": "string", "format": "date-time"},
            "outcome": {"enum": [o.value for o in FireOutcome]},
            "runId": {"type": ["string", "null"]},
            "createdAt": {"type": "string", "format": "date-time"},
        },
    },
    "CronDetails": {
        "allOf": [
            {"$ref": "#/components/schemas/Cron"},
            {
                "type": "object",
                "required": ["lastExecution", "nextFireTimes", "recentFires"],
                "properties": {
                    "lastExecution": {
                        "type": ["object", "null"],
                        "description": "The latest run the schedule started, with its status "
                        "now (null: none yet).",
                        "properties": {
                            "fireAt": {"type": "string", "format": "date-time"},
                            "outcome": {"enum": ["fired", "triggered", None]},
                            "runId": {"type": ["string", "null"]},
                            "runStatus": {"enum": [*RUN_STATUSES, None]},
                        },
                    },
                    "nextFireTimes": {
                        "type": "array",
                        "maxItems": cron.NEXT_TIMES,
                        "description": "The expression's next fire times after now, in the "
                        "schedule's zone and in UTC.",
                        "items": {
                            "type": "object",
                            "required": ["local", "utc"],
                            "properties": {
                                "local": {"type": "string", "format": "date-time"},
                                "utc": {"type": "string", "format": "date-time"},
                            },
                        },
                    },
                    "recentFires": {
                        "type": "array",
                        "maxItems": cron.RECENT_FIRES,
                        "description": "Its latest claimed occurrences, newest first.",
                        "items": {"$ref": "#/components/schemas/CronFire"},
                    },
                },
            },
        ]
    },
    "CronList": {
        "type": "object",
        "required": ["crons", "nextCursor"],
        "properties": {
            "crons": {"type": "array", "items": {"$ref": "#/components/schemas/Cron"}},
            "nextCursor": {"type": ["string", "null"]},
        },
    },
    "CronTriggered": {
        "allOf": [
            {"$ref": "#/components/schemas/CronFire"},
            {
                "type": "object",
                "required": ["cronId"],
                "properties": {"cronId": {"type": "string"}},
            },
        ]
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


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "The body is not JSON the API can read.",
        401: "No valid credentials (a bearer token, or a valid webhook signature).",
        404: "No such job, or not one the caller may see.",
        409: "The call or session ids are taken by another job.",
        413: "The body is over 1 MiB.",
        415: "The body is not application/json.",
        422: "A field or query parameter is wrong; `field` names it.",
        503: "The store cannot be reached; retry later.",
    }
    return {str(s): _json(_ref("Error"), reasons[s]) for s in statuses}


def _body(model: type[pydantic.BaseModel] | Any) -> dict[str, Any]:
    adapter = pydantic.TypeAdapter(model)
    schema = adapter.json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        SCHEMAS.setdefault(name, sub)
    return {"required": True, "content": {"application/json": {"schema": schema}}}


# The examples name objects a test service creates, so generated requests reach real ones.
JOB_ID = {
    "name": "jobId",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "example": "export:csv",
}
RUN_ID = {
    "name": "runId",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "example": "run-example",
}
AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
READ_ERRORS = (401, 404, 503)
WRITE_ERRORS = (400, 401, 404, 413, 415, 422, 503)


def _action(summary: str, model: type[pydantic.BaseModel], *more_errors: int) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "security": AUTH,
            "parameters": [JOB_ID],
            "requestBody": _body(model),
            "responses": {
                "200": _json(_ref("Changed"), "Whether it changed the job; the job after."),
                **_errors(*WRITE_ERRORS, *more_errors),
            },
        }
    }


def _run_errors(*statuses: int) -> dict[str, Any]:
    reasons = {
        404: "No such run (or workflow, on submit), or not one the caller may see.",
        409: "The run is not waiting for input.",
        422: "A field, header or query parameter is wrong; `field` names it. A refused resume "
        "lists every problem in `errors`.",
    }
    answers = _errors(*statuses)
    for status, reason in reasons.items():
        if str(status) in answers:
            answers[str(status)]["description"] = reason
    return answers


def _runs_paths() -> dict[str, Any]:
    details = _ref("RunDetails")
    return {
        "/v1/runs": {
            "get": {
                "summary": "Workflow runs the caller may see, newest first.",
                "security": AUTH,
                "parameters": [
                    _query("status", "Only runs in this status.", {"enum": RUN_STATUSES}),
                    _query("workflow", "Only runs of this workflow.", {"type": "string"}),
                    _query("user", "Only this user's runs (an admin's token).", {"type": "string"}),
                    _query(
                        "limit",
                        "Page size, 1 to 200.",
                        {"type": "integer", "minimum": 1, "maximum": 200},
                    ),
                    _query("cursor", "`nextCursor` of the previous page.", {"type": "string"}),
                ],
                "responses": {
                    "200": _json(_ref("RunList"), "A page of runs."),
                    **_run_errors(401, 422, 503),
                },
            },
            "post": {
                "summary": "Queue a run of a registered workflow for a worker.",
                "description": "The input is checked against the workflow's input type. With "
                "an Idempotency-Key the caller's earlier run with that key is returned (200).",
                "security": AUTH,
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "description": "Submit once: the same key returns the same run.",
                        "schema": {"type": "string", "minLength": 1, "maxLength": runs.MAX_KEY},
                    }
                ],
                "requestBody": _body(runs.SubmitRun),
                "responses": {
                    "201": _json(details, "Queued."),
                    "200": _json(details, "The run this Idempotency-Key made before."),
                    **_run_errors(400, 401, 404, 413, 415, 422, 503),
                },
            },
        },
        "/v1/runs/{runId}": {
            "get": {
                "summary": "One run, with the questions it waits on and its checkpoints.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "responses": {"200": _json(details, "The run."), **_run_errors(*READ_ERRORS)},
            },
            "delete": {
                "summary": "Cancel the run (a finished one is left as it is).",
                "description": "A queued or waiting run is cancelled at once; a running one "
                "gets `cancelRequested` and stops at its next task call.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "responses": {
                    "200": _json(details, "The run after the request."),
                    **_run_errors(*READ_ERRORS),
                },
            },
        },
        "/v1/runs/{runId}/events": {
            "get": {
                "summary": "The run's event log; live with Accept: text/event-stream.",
                "description": "As a stream: `event: run` messages carry the run, `event: "
                "event` messages a log entry with `id:` its seq; reconnect with Last-Event-ID. "
                "The stream ends once the run has completed, failed or been cancelled.",
                "security": AUTH,
                "parameters": [
                    RUN_ID,
                    _query("after", "Only entries after this seq.", {"type": "integer"}),
                ],
                "responses": {
                    "200": {
                        "description": "The log, or its stream.",
                        "content": {
                            "application/json": {"schema": _ref("JobEvents")},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **_run_errors(*READ_ERRORS, 422),
                },
            }
        },
        "/v1/runs/{runId}/resume": {
            "post": {
                "summary": "Answer a waiting run's questions by key and queue it for a worker.",
                "description": 'The body maps keys to answers: `{"interrupt-1": …}`. Each '
                "answer must fit its question's schema.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "requestBody": _body(runs.Resume),
                "responses": {
                    "202": _json(details, "Answers stored; the run is queued."),
                    **_run_errors(*WRITE_ERRORS, 409),
                },
            }
        },
    }


CRON_ID = {
    "name": "cronId",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "example": "cron-example",
}


def _cron_errors(*statuses: int) -> dict[str, Any]:
    reasons = {
        404: "No such schedule (or workflow, on create and change), or not one the caller may see.",
        409: "Another schedule has this name.",
        422: "A field or query parameter is wrong; `field` names it (`cronExpression`, "
        "`timezone`, …).",
    }
    answers = _errors(*statuses)
    for status, reason in reasons.items():
        if str(status) in answers:
            answers[str(status)]["description"] = reason
    return answers


def _cron_paths() -> dict[str, Any]:
    details = _ref("CronDetails")
    triggered = _ref("CronTriggered")
    return {
        "/v1/cron": {
            "get": {
                "summary": "Cron schedules the caller may see, by name.",
                "security": AUTH,
                "parameters": [
                    _query("workflow", "Only schedules of this workflow.", {"type": "string"}),
                    _query("paused", "Only paused (or running) ones.", {"enum": ["true", "false"]}),
                    _query("user", "Only this user's (an admin's token).", {"type": "string"}),
                    _query(
                        "limit",
                        "Page size, 1 to 200.",
                        {"type": "integer", "minimum": 1, "maximum": 200},
                    ),
                    _query("cursor", "`nextCursor` of the previous page.", {"type": "string"}),
                ],
                "responses": {
                    "200": _json(_ref("CronList"), "A page of schedules."),
                    **_cron_errors(401, 422, 503),
                },
            },
            "post": {
                "summary": "Start a registered workflow at each occurrence of a cron expression.",
                "description": "The first occurrence is the first after now. The input is "
                "checked against the workflow's input type.",
                "security": AUTH,
                "requestBody": _body(cron.CreateCron),
                "responses": {
                    "201": _json(details, "Created."),
                    **_cron_errors(400, 401, 404, 409, 413, 415, 422, 503),
                },
            },
        },
        "/v1/cron/{cronId}": {
            "get": {
                "summary": "One schedule, with its next fire times and latest occurrences.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "responses": {
                    "200": _json(details, "The schedule."),
                    **_cron_errors(*READ_ERRORS),
                },
            },
            "patch": {
                "summary": "Pause, resume or change a schedule.",
                "description": '`{"paused": true}` pauses, `{"paused": false}` resumes '
                "(missed occurrences go to the misfire policy); a new expression or zone "
                "restarts it at the next occurrence after now. Fields left out stay.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "requestBody": _body(cron.UpdateCron),
                "responses": {
                    "200": _json(details, "The schedule after the change."),
                    **_cron_errors(*WRITE_ERRORS, 409),
                },
            },
            "delete": {
                "summary": "Delete a schedule; the runs it started go on.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "responses": {"204": {"description": "Deleted."}, **_cron_errors(*READ_ERRORS)},
            },
        },
        "/v1/cron/{cronId}/trigger": {
            "post": {
                "summary": "Start a run now, under the schedule's concurrency policy.",
                "description": "A `skip` schedule with a run active starts nothing (200, "
                'outcome `trigger_skipped`) unless the body says `{"force": true}`.',
                "security": AUTH,
                "parameters": [CRON_ID],
                "requestBody": {**_body(cron.Trigger), "required": False},
                "responses": {
                    "202": _json(triggered, "A run was queued: `runId`."),
                    "200": _json(triggered, "Skipped: a run of the schedule is active."),
                    **_cron_errors(*WRITE_ERRORS),
                },
            }
        },
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": schema}


def _paths() -> dict[str, Any]:
    sse = {"text/event-stream": {"schema": {"type": "string"}}}
    list_params = [
        _query("state", "Only jobs in this state.", {"enum": STATES}),
        _query("tool", "Only jobs of this tool.", {"type": "string"}),
        _query("session", "Only jobs of this session.", {"type": "string"}),
        _query("limit", "Page size, 1 to 200.", {"type": "integer", "minimum": 1, "maximum": 200}),
        _query("cursor", "`nextCursor` of the previous page.", {"type": "string"}),
    ]
    return {
        "/healthz": {
            "get": {
                "summary": "The process is up.",
                "responses": {"200": _json({"type": "object"}, "Up.")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "The store answers and its schema is current.",
                "responses": {
                    "200": _json({"type": "object"}, "Ready."),
                    "503": _json({"type": "object"}, "Not ready, with `reasons`."),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics: jobs by state, deliveries, webhook outcomes.",
                "responses": {
                    "200": {"description": "Prometheus text.", "content": {"text/plain": {}}},
                    **_errors(503),
                },
            }
        },
        "/v1/jobs": {
            "get": {
                "summary": "Jobs the caller may see, newest first.",
                "security": AUTH,
                "parameters": list_params,
                "responses": {
                    "200": _json(_ref("JobList"), "A page of jobs."),
                    **_errors(401, 422, 503),
                },
            },
            "post": {
                "summary": "Create a job for a tool that runs outside Python (idempotent).",
                "security": AUTH,
                "requestBody": _body(jobs.CreateJob),
                "responses": {
                    "201": _json(_ref("Job"), "Created."),
                    "200": _json(_ref("Job"), "It existed: the job as it is."),
                    **_errors(400, 401, 404, 409, 413, 415, 422, 503),
                },
            },
        },
        "/v1/jobs/{jobId}": {
            "get": {
                "summary": "One job.",
                "security": AUTH,
                "parameters": [JOB_ID],
                "responses": {"200": _json(_ref("Job"), "The job."), **_errors(*READ_ERRORS)},
            }
        },
        "/v1/jobs/{jobId}/events": {
            "get": {
                "summary": "The job's event log; live with Accept: text/event-stream.",
                "description": "As a stream: `event: job` messages carry the job, `event: "
                "event` messages a log entry with `id:` its seq; reconnect with Last-Event-ID.",
                "security": AUTH,
                "parameters": [JOB_ID],
                "responses": {
                    "200": {
                        "description": "The log, or its stream.",
                        "content": {
                            "application/json": {"schema": _ref("JobEvents")},
                            **sse,
                        },
                    },
                    **_errors(*READ_ERRORS, 422),
                },
            }
        },
        "/v1/jobs/{jobId}/complete": _action(
            "Complete the job (first result wins).", jobs.Complete
        ),
        "/v1/jobs/{jobId}/fail": _action("Fail the job.", jobs.Fail),
        "/v1/jobs/{jobId}/cancel": _action("Cancel the job.", jobs.Cancel),
        "/v1/jobs/{jobId}/progress": _action("Report progress.", jobs.Progress),
        "/v1/jobs/{jobId}/attach": _action(
            "Attach the job to its agent session and call.", jobs.Attach, 409
        ),
        "/v1/jobs/{jobId}/extend": _action("Set a new deadline, from now.", jobs.Extend),
        "/v1/events": {
            "get": {
                "summary": "A stream of every change to a job the caller may see.",
                "description": "Server-sent events: `event: job`, the whole job as data, "
                "`id:` a cursor; reconnect with Last-Event-ID.",
                "security": AUTH,
                "parameters": [
                    _query("session", "Only jobs of this session.", {"type": "string"}),
                    _query("tool", "Only jobs of this tool.", {"type": "string"}),
                ],
                "responses": {
                    "200": {"description": "The stream.", "content": sse},
                    **_errors(401, 422, 503),
                },
            }
        },
        **_runs_paths(),
        **_cron_paths(),
        "/v1/sessions/{sessionId}/transcript": {
            "get": {
                "summary": "The conversation of a session the caller has a job in.",
                "security": AUTH,
                "parameters": [
                    {
                        "name": "sessionId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": _json(_ref("Transcript"), "Its events, in order."),
                    **_errors(*READ_ERRORS),
                },
            }
        },
        "/v1/hooks/{source}": {
            "post": {
                "summary": "A signed delivery from outside (Standard Webhooks).",
                "description": "Signed with webhook-id, webhook-timestamp and "
                "webhook-signature headers. Every verified delivery is answered 2xx: "
                "duplicates, late results and unknown jobs too.",
                "parameters": [
                    {"name": "source", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": _body(hooks.Delivery),
                "responses": {
                    "200": _json(_ref("HookAnswer"), "Recorded (see `outcome`)."),
                    "202": _json(_ref("HookAnswer"), "Kept for a job not created yet."),
                    **_errors(400, 401, 413, 415, 422, 503),
                },
            }
        },
    }


@cache
def document() -> dict[str, Any]:
    paths = _paths()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "longcall",
            "version": version("longcall"),
            "description": "Durable long-running tool calls for AI agents.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


async def openapi(request: Request) -> Response:
    return JSONResponse(document())


def _docs_page() -> str:
    rows = []
    for path, operations in document()["paths"].items():
        for method, op in operations.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            example = json.dumps(body.get("schema", {}), indent=2) if body else ""
            statuses = ", ".join(op["responses"])
            rows.append(
                f"<section><h2><code>{method.upper()} {html.escape(path)}</code></h2>"
                f"<p>{html.escape(op['summary'])}</p>"
                + (f"<p>{html.escape(op['description'])}</p>" if "description" in op else "")
                + (
                    f"<details><summary>Body schema</summary><pre>{html.escape(example)}</pre>"
                    "</details>"
                    if example
                    else ""
                )
                + f"<p>Answers: {html.escape(statuses)}</p></section>"
            )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>longcall API</title>"
        '<link rel=stylesheet href="/static/dashboard.css"></head><body><main>'
        "<h1>longcall API</h1><p>The machine-readable version is "
        '<a href="/openapi.json">/openapi.json</a>. Send <code>Authorization: Bearer '
        "&lt;token&gt;</code> (<code>longcall tokens create</code>).</p>"
        + "".join(rows)
        + "</main></body></html>"
    )


async def docs(request: Request) -> Response:
    return HTMLResponse(_docs_page())


ROUTES = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]
