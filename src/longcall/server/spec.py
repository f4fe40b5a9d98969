"""``/openapi.json`` and ``/docs``: the HTTP API described once, from the models it validates.

Request bodies come from the pydantic models the handlers use, so the spec cannot drift from
what is accepted; responses are written out here and checked against the running server by
the schemathesis test. ``/docs`` renders the same document as one HTML page, served by the
app itself (no files from a CDN).

The document is put together here from its parts: ``spec_jobs`` (health, jobs, transcripts,
webhooks), ``spec_runs`` and ``spec_cron``, built from the pieces in ``spec_common``.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.metadata import version
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from longcall.server import spec_common, spec_cron, spec_jobs, spec_runs


@cache
def document() -> dict[str, Any]:
    paths = {**spec_jobs.paths(), **spec_runs.paths(), **spec_cron.paths()}
    schemas = {**spec_common.SCHEMAS, **spec_jobs.SCHEMAS, **spec_runs.SCHEMAS, **spec_cron.SCHEMAS}
    _move_definitions(paths, schemas)
    _add_refusals(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "longcall",
            "version": version("longcall"),
            "description": "Durable long-running tool calls for AI agents.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _move_definitions(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Moves the models nested in request bodies (pydantic's ``$defs``) among the components,
    where the bodies' references point."""
    for operations in paths.values():
        for operation in operations.values():
            content = operation.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema", {})
            for name, nested in schema.pop("$defs", {}).items():
                schemas.setdefault(name, nested)


CHECKED = {
    400: "A NUL character in an id, a query parameter or the body (no store keeps one), or a "
    "body that is not JSON the API can read.",
    422: "An id, query parameter or field breaks its rule (length, characters); `field` names it.",
}
SHARED = {429: "This token already has its share of writes in progress; retry after Retry-After."}


def _add_refusals(paths: dict[str, Any]) -> None:
    """Every operation taking parameters or a body may refuse them (``server.checks``: 400 for
    a NUL, 422 for a broken rule), and every write with a token may be past its share (429)."""
    for operations in paths.values():
        for method, operation in operations.items():
            answers = operation["responses"]
            if operation.get("parameters") or operation.get("requestBody"):
                for status, reason in CHECKED.items():
                    answers.setdefault(
                        str(status), spec_common.json_answer(spec_common.ref("Error"), reason)
                    )
            if method in ("post", "put", "patch", "delete") and operation.get("security"):
                for status, reason in SHARED.items():
                    answers.setdefault(
                        str(status), spec_common.json_answer(spec_common.ref("Error"), reason)
                    )


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
