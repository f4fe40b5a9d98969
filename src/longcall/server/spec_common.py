"""The pieces every part of the OpenAPI document is built from: schema and answer helpers,
the error shape, and the event log that jobs and runs share.

Each part (``spec_jobs``, ``spec_runs``, ``spec_cron``) has its ``SCHEMAS`` and a ``paths()``;
``spec.document()`` puts them together.
"""

from __future__ import annotations

from typing import Any

import pydantic

from longcall.server.checks import PATH_RULES, QUERY_RULES, param_schema

ANY: dict[str, Any] = {}  # any JSON value
TIME = {"type": "string", "format": "date-time"}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
READ_ERRORS = (401, 404, 503)
WRITE_ERRORS = (400, 401, 404, 413, 415, 422, 503)
SSE = {"text/event-stream": {"schema": {"type": "string"}}}
REASONS = {
    400: "The body is not JSON the API can read.",
    401: "No valid credentials (a bearer token, or a valid webhook signature).",
    404: "No such job, or not one the caller may see.",
    409: "The call or session ids are taken by another job.",
    413: "The body is over 1 MiB.",
    415: "The body is not application/json.",
    422: "A field or query parameter is wrong; `field` names it.",
    503: "The store cannot be reached; retry later.",
}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_answer(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(*statuses: int, reasons: dict[int, str] | None = None) -> dict[str, Any]:
    """The error answers for ``statuses``, each with the reason in ``reasons`` if it has one,
    the general one otherwise."""
    closer = reasons or {}
    return {str(s): json_answer(ref("Error"), closer.get(s, REASONS[s])) for s in statuses}


def body(model: type[pydantic.BaseModel] | Any) -> dict[str, Any]:
    """A request body of ``model``. Its nested models stay under ``$defs`` until
    ``spec.document()`` moves them among the components, where its references point."""
    adapter = pydantic.TypeAdapter(model)
    schema = adapter.json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter; a string one with a rule (``checks.QUERY_RULES``) gets its bounds."""
    if schema == {"type": "string"} and name in QUERY_RULES:
        schema = param_schema(QUERY_RULES[name])
    return {"name": name, "in": "query", "description": description, "schema": schema}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


# The spec names path ids as the API does (jobId); their rules are the routes' (job_id).
PATH_IDS = {_camel(route_name): kind for route_name, kind in PATH_RULES.items()}


def path_id(name: str, example: str | None = None) -> dict[str, Any]:
    """An id in the path, with its rule's bounds. An example names an object the schema
    test's service creates, so generated requests reach a real one."""
    schema = param_schema(PATH_IDS[name])
    param = {"name": name, "in": "path", "required": True, "schema": schema}
    return param if example is None else {**param, "example": example}


# The parameters of every paged list, after its filters.
PAGE = [
    query("limit", "Page size, 1 to 200.", {"type": "integer", "minimum": 1, "maximum": 200}),
    query("cursor", "`nextCursor` of the previous page.", {"type": "string"}),
]


def page_of(key: str, item: str) -> dict[str, Any]:
    """The schema of a page of a list: ``key`` holds the ``item`` objects."""
    return {
        "type": "object",
        "required": [key, "nextCursor"],
        "properties": {
            key: {"type": "array", "items": ref(item)},
            "nextCursor": {"type": ["string", "null"]},
        },
    }


EVENT_LOG = {
    "description": "The log, or its stream.",
    "content": {"application/json": {"schema": ref("JobEvents")}, **SSE},
}

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
    # A job's log and a run's: the same entries.
    "JobEvent": {
        "type": "object",
        "required": ["seq", "kind", "data", "createdAt"],
        "properties": {
            "seq": {"type": "integer"},
            "kind": {"type": "string"},
            "data": ANY,
            "createdAt": TIME,
        },
    },
    "JobEvents": {
        "type": "object",
        "required": ["events"],
        "properties": {"events": {"type": "array", "items": ref("JobEvent")}},
    },
}
