"""The cron part of the OpenAPI document: ``/v1/cron``, to create, list, pause, change, trigger
and delete the schedules that start workflow runs."""

from __future__ import annotations

from typing import Any

from longcall.core.cron import ConcurrencyPolicy, FireOutcome, MisfirePolicy
from longcall.server import cron, runs
from longcall.server.spec_common import (
    ANY,
    AUTH,
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

CRON_ID = path_id("cronId", example="cron-example")
REASONS = {
    404: "No such schedule (or workflow, on create and change), or not one the caller may see.",
    409: "Another schedule has this name.",
    422: "A field or query parameter is wrong; `field` names it (`cronExpression`, `timezone`, …).",
}

SCHEMAS: dict[str, Any] = {
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
            "createdAt": TIME,
            "updatedAt": TIME,
        },
    },
    "CronFire": {
        "type": "object",
        "required": ["fireAt", "outcome", "runId", "createdAt"],
        "properties": {
            "fireAt": TIME,
            "outcome": {"enum": [o.value for o in FireOutcome]},
            "runId": {"type": ["string", "null"]},
            "createdAt": TIME,
        },
    },
    "CronDetails": {
        "allOf": [
            ref("Cron"),
            {
                "type": "object",
                "required": ["lastExecution", "nextFireTimes", "recentFires"],
                "properties": {
                    "lastExecution": {
                        "type": ["object", "null"],
                        "description": "The latest run the schedule started, with its status "
                        "now (null: none yet).",
                        "properties": {
                            "fireAt": TIME,
                            "outcome": {"enum": ["fired", "triggered", None]},
                            "runId": {"type": ["string", "null"]},
                            "runStatus": {"enum": [*runs.STATUSES, None]},
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
                            "properties": {"local": TIME, "utc": TIME},
                        },
                    },
                    "recentFires": {
                        "type": "array",
                        "maxItems": cron.RECENT_FIRES,
                        "description": "Its latest claimed occurrences, newest first.",
                        "items": ref("CronFire"),
                    },
                },
            },
        ]
    },
    "CronList": page_of("crons", "Cron"),
    "CronTriggered": {
        "allOf": [
            ref("CronFire"),
            {
                "type": "object",
                "required": ["cronId"],
                "properties": {"cronId": {"type": "string"}},
            },
        ]
    },
}


def _errors(*statuses: int) -> dict[str, Any]:
    return errors(*statuses, reasons=REASONS)


def paths() -> dict[str, Any]:
    details = ref("CronDetails")
    triggered = ref("CronTriggered")
    return {
        "/v1/cron": {
            "get": {
                "summary": "Cron schedules the caller may see, by name.",
                "security": AUTH,
                "parameters": [
                    query("workflow", "Only schedules of this workflow.", {"type": "string"}),
                    query("paused", "Only paused (or running) ones.", {"enum": ["true", "false"]}),
                    query("user", "Only this user's (an admin's token).", {"type": "string"}),
                    *PAGE,
                ],
                "responses": {
                    "200": json_answer(ref("CronList"), "A page of schedules."),
                    **_errors(401, 422, 503),
                },
            },
            "post": {
                "summary": "Start a registered workflow at each occurrence of a cron expression.",
                "description": "The first occurrence is the first after now. The input is "
                "checked against the workflow's input type.",
                "security": AUTH,
                "requestBody": body(cron.CreateCron),
                "responses": {
                    "201": json_answer(details, "Created."),
                    **_errors(400, 401, 404, 409, 413, 415, 422, 503),
                },
            },
        },
        "/v1/cron/{cronId}": {
            "get": {
                "summary": "One schedule, with its next fire times and latest occurrences.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "responses": {
                    "200": json_answer(details, "The schedule."),
                    **_errors(*READ_ERRORS),
                },
            },
            "patch": {
                "summary": "Pause, resume or change a schedule.",
                "description": '`{"paused": true}` pauses, `{"paused": false}` resumes '
                "(missed occurrences go to the misfire policy); a new expression or zone "
                "restarts it at the next occurrence after now. Fields left out stay.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "requestBody": body(cron.UpdateCron),
                "responses": {
                    "200": json_answer(details, "The schedule after the change."),
                    **_errors(*WRITE_ERRORS, 409),
                },
            },
            "delete": {
                "summary": "Delete a schedule; the runs it started go on.",
                "security": AUTH,
                "parameters": [CRON_ID],
                "responses": {"204": {"description": "Deleted."}, **_errors(*READ_ERRORS)},
            },
        },
        "/v1/cron/{cronId}/trigger": {
            "post": {
                "summary": "Start a run now, under the schedule's concurrency policy.",
                "description": "A `skip` schedule with a run active starts nothing (200, "
                'outcome `trigger_skipped`) unless the body says `{"force": true}`.',
                "security": AUTH,
                "parameters": [CRON_ID],
                "requestBody": {**body(cron.Trigger), "required": False},
                "responses": {
                    "202": json_answer(triggered, "A run was queued: `runId`."),
                    "200": json_answer(triggered, "Skipped: a run of the schedule is active."),
                    **_errors(*WRITE_ERRORS),
                },
            }
        },
    }
