"""Every id a request carries is checked before any handler runs, let alone any SQL.

:func:`guard` wraps each route: the ids in its path, its query and its id-carrying headers
must keep the rules of :mod:`longcall.core.ids`. A NUL anywhere is ``400 bad_request`` (no store
can keep one, and PostgreSQL cannot even compare one); any other broken rule is ``422`` with
``field`` naming the parameter. Bodies are checked where they are parsed: their fields have
the same bounds as pydantic constraints (:func:`bounded`), and a NUL in any string of a body
is refused by :func:`nul_in_body`. The OpenAPI document publishes the same rules
(:func:`param_schema`).

An id that passed is short enough for every index it goes into, so a request can no longer
make PostgreSQL refuse an index entry, which the store used to retry for a minute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
from starlette.datastructures import Headers, QueryParams
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from longcall.core.ids import RULES, IdRule, find_nul
from longcall.server.errors import error

PATH_RULES: Mapping[str, str] = {
    "job_id": "job_id",
    "run_id": "run_id",
    "stream_key": "event_key",  # ctx.stream's key, on /v1/runs/{runId}/streams/
    "cron_id": "cron_id",
    "session_id": "session_id",
    "source": "source",
    "event_key": "event_key",
}
"""Each path parameter's rule (names as in the routes)."""

QUERY_RULES: Mapping[str, str] = {
    "tool": "tool_name",
    "session": "session_id",
    "user": "user_id",
    "workflow": "workflow_id",
    "cursor": "cursor",
    "q": "search",
    "before": "job_id",  # the dashboard's "older than this job (or run)"
    "token": "token",
}
"""Each query parameter's rule; any other parameter has :data:`ANY_QUERY`'s."""

ANY_QUERY = IdRule("query parameter", 512, min_length=0)
"""Query parameters with no rule of their own (``state``, ``limit``, ``after``, …): their
handlers check what they mean; this only bounds them and keeps out control characters."""

HEADER_RULES: Mapping[str, IdRule] = {
    "idempotency-key": RULES["idempotency_key"],
    # The last event seen: a seq on a job's or run's stream, a cursor on /v1/events.
    "last-event-id": IdRule("Last-Event-ID", RULES["cursor"].max_length, min_length=0),
}
"""Request headers that carry an id, with their rules (``webhook-id``: :func:`webhook_headers`)."""

WEBHOOK_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


def problem_answer(rule: IdRule, value: str, field: str, *, code: str) -> Response | None:
    """The 400/422 answer for ``value`` breaking ``rule``, or None when it keeps it."""
    problem = rule.problem(value)
    if problem is None:
        return None
    if "\x00" in value:
        return error(400, "bad_request", problem, field)
    return error(422, code, problem, field)


PAGE_CHECKS_ITSELF = frozenset({"q"})
"""Query parameters a dashboard page checks itself, to say what is wrong on the page."""


def request_problem(scope: Scope, *, page: bool = False) -> Response | None:
    """The answer refusing the ids of this routed request, or None when they are all fine;
    for a dashboard ``page``, not the parameters it checks itself."""
    for name, value in scope.get("path_params", {}).items():
        kind = PATH_RULES.get(name)
        if kind is not None and isinstance(value, str):
            rule = RULES[kind]
            answer = problem_answer(rule, value, rule.label, code="invalid_path")
            if answer is not None:
                return answer
    for name, value in QueryParams(scope.get("query_string", b"")).multi_items():
        if page and name in PAGE_CHECKS_ITSELF:
            continue
        kind = QUERY_RULES.get(name)
        rule = ANY_QUERY if kind is None else RULES[kind]
        answer = problem_answer(rule, value, name, code="invalid_query")
        if answer is not None:
            return answer
    headers = Headers(scope=scope)
    for name, rule in HEADER_RULES.items():
        for value in headers.getlist(name):
            answer = problem_answer(rule, value, rule.label, code="invalid_header")
            if answer is not None:
                return answer
    return None


class Checked:
    """A route's endpoint behind the id checks of :func:`request_problem`."""

    def __init__(self, app: ASGIApp, *, page: bool = False) -> None:
        self.app = app
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = request_problem(scope, page=self.page) if scope["type"] == "http" else None
        if answer is not None:
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)


def guard(routes: list[BaseRoute]) -> None:
    """Put every route of ``routes`` behind the id checks (in place)."""
    for route in routes:
        if isinstance(route, Route) and not isinstance(route.app, Checked):
            page = not route.path.startswith("/v1/")
            route.app = Checked(route.app, page=page)


def webhook_headers(headers: Headers) -> dict[str, str] | Response:
    """The Standard Webhooks headers decoded as UTF-8 (HTTP gives bytes; Starlette reads them
    as latin-1, so a non-ASCII ``webhook-id`` could never match what its sender signed), or
    the answer refusing them: 400 for one that is not UTF-8 or a ``webhook-id`` that breaks
    its rule (too long, a control character), 401 for one given twice with different values.
    Nothing has been read from the store yet when these are refused."""
    decoded: dict[str, str] = {}
    for raw_name, raw_value in headers.raw:
        name = raw_name.decode("latin-1").lower()
        if name not in WEBHOOK_HEADERS:
            continue
        try:
            value = raw_value.decode("utf-8")
        except UnicodeDecodeError:
            return error(400, "webhook_bad_request", f"header {name} is not UTF-8", name)
        if decoded.setdefault(name, value) != value:
            return error(
                401, "webhook_unauthorized", f"header {name} is given twice with different values"
            )
    webhook_id = decoded.get("webhook-id")
    if webhook_id is not None:
        problem = RULES["webhook_id"].problem(webhook_id)
        if problem is not None:
            return error(400, "webhook_bad_request", problem, "webhook-id")
    return decoded


def nul_in_body(data: Any) -> Response | None:
    """The 400 answer for a parsed JSON body with a NUL in any string or key, or None."""
    where = find_nul(data)
    if where is None:
        return None
    field = where.replace("\x00", "\\u0000") or None
    return error(400, "bad_request", "the body has a NUL character (\\u0000)", field)


def bounded(kind: str, **options: Any) -> Any:
    """A pydantic ``Field`` with the bounds and character rule of ``kind``'s :class:`IdRule`
    (pass ``alias=`` and the like in ``options``)."""
    rule = RULES[kind]
    schema = rule.json_schema()
    return pydantic.Field(
        min_length=rule.min_length,
        max_length=rule.max_length,
        pattern=schema["pattern"],
        **options,
    )


def param_schema(kind: str) -> dict[str, Any]:
    """The OpenAPI schema of a path or query parameter with ``kind``'s rule."""
    return RULES[kind].json_schema()
