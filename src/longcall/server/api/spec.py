"""``/openapi.json``: the OpenAPI document of the HTTP API, made from its operations.

Nothing here describes a route by hand: each :class:`~.operation.Operation` gives its path,
parameters, body model and answer models, and the same operations make the app's routes, so
the document cannot drift from what is served. Bodies are documented as they are validated
and answers as their models dump them (pydantic's JSON schemas, their nested models among
the components).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib.metadata import version
from typing import Any

import pydantic
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.server.api.operation import Answer, Operation, Param, path_params, spec_path
from longcall.server.checks import PATH_RULES, param_schema
from longcall.server.errors import Error
from longcall.server.fair_share import WRITES

_REF = "#/components/schemas/{model}"

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
"""The general reason of each error status; an operation may give its own."""

CHECKED = {
    400: "A NUL character in an id, a query parameter or the body (no store keeps one), or a "
    "body that is not JSON the API can read.",
    422: "An id, query parameter or field breaks its rule (length, characters); `field` names it.",
}
"""What ``server.checks`` answers for any operation with parameters or a body."""

SHARED = {429: "This token already has its share of writes in progress; retry after Retry-After."}
"""What ``fair_share.WriteShare`` answers for any write with a token."""

PATH_EXAMPLES = {"jobId": "export:csv", "runId": "run-example", "cronId": "cron-example"}
"""Ids of objects the schema tests' service creates, so generated requests reach real ones."""


def _models(operations: Iterable[Operation]) -> list[type[pydantic.BaseModel]]:
    found: dict[type[pydantic.BaseModel], None] = {Error: None}
    for operation in operations:
        for answer in operation.answers.values():
            if isinstance(answer.model, tuple):
                found.update(dict.fromkeys(answer.model))
            elif answer.model is not None:
                found[answer.model] = None
    return list(found)


class _Components:
    """The schemas the document's references point to, gathered from every model used."""

    def __init__(self, models: Sequence[type[pydantic.BaseModel]]) -> None:
        refs, top = models_json_schema(
            [(m, "serialization") for m in models], by_alias=True, ref_template=_REF
        )
        self.refs = {model: refs[(model, "serialization")] for model in models}
        self.schemas: dict[str, Any] = dict(top.get("$defs", {}))

    def add(self, name: str, schema: dict[str, Any]) -> None:
        """Add a schema nested in a body; a different one by the same name is a mistake."""
        known = self.schemas.setdefault(name, schema)
        if known != schema:
            raise ValueError(f"two different schemas are both named {name!r}")

    def answer(self, answer: Answer) -> dict[str, Any]:
        content: dict[str, Any] = {}
        if isinstance(answer.model, tuple):
            content["application/json"] = {
                "schema": {"anyOf": [self.refs[m] for m in answer.model]}
            }
        elif answer.model is not None:
            content["application/json"] = {"schema": self.refs[answer.model]}
        if answer.stream:
            content["text/event-stream"] = {"schema": {"type": "string"}}
        if answer.media is not None:
            content[answer.media] = {"schema": {"type": "string"}}
        return {"description": answer.description, **({"content": content} if content else {})}

    def error(self, reason: str) -> dict[str, Any]:
        return self.answer(Answer(reason, Error))

    def body(self, operation: Operation) -> dict[str, Any]:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(operation.body)
        schema = adapter.json_schema(by_alias=True, ref_template=_REF)
        for name, nested in schema.pop("$defs", {}).items():
            self.add(name, nested)
        return {
            "required": operation.body_required,
            "content": {"application/json": {"schema": schema}},
        }


def _path_param(route_name: str, name: str) -> dict[str, Any]:
    param = {
        "name": name,
        "in": "path",
        "required": True,
        "schema": param_schema(PATH_RULES[route_name]),
    }
    return {**param, "example": PATH_EXAMPLES[name]} if name in PATH_EXAMPLES else param


def _param(param: Param) -> dict[str, Any]:
    return {
        "name": param.name,
        "in": param.where,
        "description": param.description,
        "schema": dict(param.schema),
    }


def _operation(operation: Operation, components: _Components) -> dict[str, Any]:
    described: dict[str, Any] = {"tags": [operation.tag], "summary": operation.summary}
    if operation.description is not None:
        described["description"] = operation.description
    if operation.deprecated:
        described["deprecated"] = True
    if operation.auth:
        described["security"] = [{"bearer": []}]
    params = [_path_param(*names) for names in path_params(operation.path)]
    params += [_param(p) for p in operation.params]
    if params:
        described["parameters"] = params
    if operation.body is not None:
        described["requestBody"] = components.body(operation)
    answers = {str(status): components.answer(a) for status, a in operation.answers.items()}
    for status in operation.refusals:
        reason = operation.reasons.get(status, REASONS[status])
        answers.setdefault(str(status), components.error(reason))
    if params or operation.body is not None:
        for status, reason in CHECKED.items():
            answers.setdefault(str(status), components.error(reason))
    if operation.method in WRITES and operation.auth:
        for status, reason in SHARED.items():
            answers.setdefault(str(status), components.error(reason))
    described["responses"] = answers
    return described


def document(operations: Sequence[Operation]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations``."""
    components = _Components(_models(operations))
    paths: dict[str, dict[str, Any]] = {}
    for operation in operations:
        methods = paths.setdefault(spec_path(operation.path), {})
        methods[operation.method.lower()] = _operation(operation, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "longcall",
            "version": version("longcall"),
            "description": "Durable long-running tool calls for AI agents.",
        },
        "paths": paths,
        "components": {
            "schemas": components.schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def route(operations: Sequence[Operation]) -> Route:
    """``GET /openapi.json``, the document of ``operations`` (made on the first request)."""
    made: list[dict[str, Any]] = []

    async def openapi(request: Request) -> Response:
        if not made:
            made.append(document(operations))
        return JSONResponse(made[0])

    return Route("/openapi.json", openapi, methods=["GET"])
