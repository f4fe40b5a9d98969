"""The runs part of the OpenAPI document: ``/v1/runs``, to submit workflow runs, answer the
questions they wait on, follow and cancel them."""

from __future__ import annotations

from typing import Any

from longcall.server import runs
from longcall.server.checks import param_schema
from longcall.server.spec_common import (
    ANY,
    AUTH,
    EVENT_LOG,
    NULLABLE_TIME,
    PAGE,
    READ_ERRORS,
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

RUN_ID = path_id("runId", example="run-example")
REASONS = {
    404: "No such run (or workflow, on submit), or not one the caller may see.",
    409: "The run is not waiting for input.",
    422: "A field, header or query parameter is wrong; `field` names it. Refused answers "
    "list every problem in `errors`.",
}

SCHEMAS: dict[str, Any] = {
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
            "status": {"enum": runs.STATUSES},
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
            "createdAt": TIME,
            "updatedAt": TIME,
            "finishedAt": NULLABLE_TIME,
        },
    },
    "RunDetails": {
        "allOf": [
            ref("Run"),
            {
                "type": "object",
                "required": ["pendingInterrupts", "steps"],
                "properties": {
                    "pendingInterrupts": {"type": "array", "items": ref("PendingInterrupt")},
                    "steps": {"type": "array", "items": ref("Step")},
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
            "startedAt": TIME,
            "finishedAt": TIME,
        },
    },
    "RunList": page_of("runs", "Run"),
    "Worker": {
        "type": "object",
        "required": ["workerId", "workflows", "startedAt", "heartbeatAt", "expiresAt"],
        "properties": {
            "workerId": {"type": "string"},
            "workflows": {"type": "array", "items": {"type": "string"}},
            "startedAt": TIME,
            "heartbeatAt": TIME,
            "expiresAt": TIME,
        },
    },
    "WorkerList": {
        "type": "object",
        "required": ["workers"],
        "properties": {"workers": {"type": "array", "items": ref("Worker")}},
    },
}


def _errors(*statuses: int) -> dict[str, Any]:
    return errors(*statuses, reasons=REASONS)


def paths() -> dict[str, Any]:
    details = ref("RunDetails")
    return {
        "/v1/runs": {
            "get": {
                "summary": "Workflow runs the caller may see, newest first.",
                "security": AUTH,
                "parameters": [
                    query("status", "Only runs in this status.", {"enum": runs.STATUSES}),
                    query("workflow", "Only runs of this workflow.", {"type": "string"}),
                    query("user", "Only this user's runs (an admin's token).", {"type": "string"}),
                    *PAGE,
                ],
                "responses": {
                    "200": json_answer(ref("RunList"), "A page of runs."),
                    **_errors(401, 422, 503),
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
                        "schema": param_schema("idempotency_key"),
                    }
                ],
                "requestBody": body(runs.SubmitRun),
                "responses": {
                    "201": json_answer(details, "Queued."),
                    "200": json_answer(details, "The run this Idempotency-Key made before."),
                    **_errors(400, 401, 404, 413, 415, 422, 503),
                },
            },
        },
        "/v1/runs/{runId}": {
            "get": {
                "summary": "One run, with the questions it waits on and its checkpoints.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "responses": {"200": json_answer(details, "The run."), **_errors(*READ_ERRORS)},
            },
            "delete": {
                "summary": "Cancel the run (a finished one is left as it is).",
                "description": "A queued or waiting run is cancelled at once; a running one "
                "gets `cancelRequested` and stops at its next task call.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "responses": {
                    "200": json_answer(details, "The run after the request."),
                    **_errors(*READ_ERRORS),
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
                    query("after", "Only entries after this seq.", {"type": "integer"}),
                ],
                "responses": {"200": EVENT_LOG, **_errors(*READ_ERRORS, 422)},
            }
        },
        "/v1/runs/{runId}/answers": {
            "post": {
                "summary": "Answer a waiting run's questions by key and queue it for a worker.",
                "description": 'The body maps keys to answers: `{"interrupt-1": …}`. Each '
                "answer must fit its question's schema. A key the run has not asked (unless "
                "it answers the next question ahead, together with the one the run waits "
                "on) and one already answered are refused with 422.",
                "security": AUTH,
                "parameters": [RUN_ID],
                "requestBody": body(runs.Answers),
                "responses": {
                    "202": json_answer(details, "Answers stored; the run is queued."),
                    **_errors(*WRITE_ERRORS, 409),
                },
            }
        },
        "/v1/runs/{runId}/resume": {
            "post": {
                "summary": "The deprecated path of /v1/runs/{runId}/answers (for one release).",
                "description": "The same as `POST /v1/runs/{runId}/answers`; its answers carry "
                "a `Deprecation: true` header and a `Link` to the new path.",
                "deprecated": True,
                "security": AUTH,
                "parameters": [RUN_ID],
                "requestBody": body(runs.Answers),
                "responses": {
                    "202": json_answer(details, "Answers stored; the run is queued."),
                    **_errors(*WRITE_ERRORS, 409),
                },
            }
        },
        "/v1/workers": {
            "get": {
                "summary": "The workers alive and the workflows each can run.",
                "description": "A worker beats as it sweeps, every few seconds; one whose last "
                "beat has expired is not listed. A queued run whose workflow no worker here "
                "can run waits until one that can starts.",
                "security": AUTH,
                "responses": {
                    "200": json_answer(ref("WorkerList"), "The live workers, oldest first."),
                    **_errors(401, 503),
                },
            }
        },
    }
