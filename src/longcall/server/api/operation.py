"""Each route of the HTTP API declared once, as an :class:`Operation`: the Starlette route the
app serves and the OpenAPI operation ``/openapi.json`` publishes are both made from it.

An operation names its method and path (as Starlette routes it), its endpoint, the model its
body is validated with, its query and header parameters, and the model of each answer by
status. Path parameters come from the path itself, with the rules ``server.checks`` enforces.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from longcall.server.checks import QUERY_RULES, param_schema

Endpoint = Callable[[Request], Awaitable[Response]]

_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def spec_path(path: str) -> str:
    """A route's path as the API documents it: ``/v1/jobs/{job_id:path}`` is
    ``/v1/jobs/{jobId}``."""
    return _PATH_PARAM.sub(lambda m: "{" + _camel(m[1]) + "}", path)


def path_params(path: str) -> list[tuple[str, str]]:
    """The parameters in a route's path: (the name the route gives it, the API's name)."""
    return [(m[1], _camel(m[1])) for m in _PATH_PARAM.finditer(path)]


@dataclass(frozen=True, slots=True)
class Param:
    """A query or header parameter: its name, what it means, and the schema of its value."""

    name: str
    where: Literal["query", "header"]
    description: str
    schema: Mapping[str, Any]


def query(name: str, description: str, schema: Mapping[str, Any] | None = None) -> Param:
    """A query parameter; a string one (``schema`` left out) gets its rule's bounds when it
    has one (``checks.QUERY_RULES``)."""
    if schema is None:
        schema = param_schema(QUERY_RULES[name]) if name in QUERY_RULES else {"type": "string"}
    return Param(name, "query", description, schema)


def header(name: str, description: str, rule: str) -> Param:
    """A request header with the rule ``rule`` of :mod:`longcall.core.ids`."""
    return Param(name, "header", description, param_schema(rule))


PAGE = (
    query("limit", "Page size, 1 to 200.", {"type": "integer", "minimum": 1, "maximum": 200}),
    query("cursor", "`nextCursor` of the previous page."),
)
"""The parameters of every paged list, after its filters."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One status of an operation: what it means and the model of its JSON body (none: an
    empty body; several: the body is one of them). ``stream`` says the same answer comes as
    server-sent events when asked for with ``Accept: text/event-stream``; ``media`` names a
    body that is not JSON."""

    description: str
    model: type[pydantic.BaseModel] | tuple[type[pydantic.BaseModel], ...] | None = None
    stream: bool = False
    media: str | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    """A route of the API and everything its OpenAPI operation says.

    ``refusals`` are the error statuses it may answer (each with the general reason, or the
    one in ``reasons``); the 400/422 of the id checks and the 429 of a write past its share
    are added to every operation they apply to.
    """

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    endpoint: Endpoint
    tag: str
    summary: str
    answers: Mapping[int, Answer]
    description: str | None = None
    body: Any = None  # a type pydantic validates the JSON body as
    body_required: bool = True
    params: tuple[Param, ...] = ()
    refusals: tuple[int, ...] = ()
    reasons: Mapping[int, str] = field(default_factory=dict)
    auth: bool = True
    deprecated: bool = False

    def route(self, wrap: Callable[[Endpoint], Endpoint] | None = None) -> Route:
        """The Starlette route; ``wrap`` (if given) wraps the endpoint (to count answers)."""
        endpoint = self.endpoint if wrap is None else wrap(self.endpoint)
        return Route(self.path, endpoint, methods=[self.method])
