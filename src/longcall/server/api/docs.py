"""``/docs``: the API document rendered by Swagger UI, shipped with the package.

The viewer is vendored (``static/swagger-ui/``, its license beside it) and served from this
server, under the same Content-Security-Policy as the dashboard: nothing from elsewhere, no
inline script or style. The page starts it from a script file of its own (``static/docs.js``),
and ``static/docs.css`` draws the few icons Swagger UI's style sheet gives as ``data:`` images,
which that policy does not load. Without JavaScript the page lists the operations.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from longcall.server.api.operation import Operation, spec_path

STATIC = Path(__file__).with_name("static")

HEADERS = {
    # The dashboard's policy: only this origin, nothing inline, so the viewer cannot be made
    # to run anything a document or a response put into the page.
    "content-security-policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "referrer-policy": "same-origin",
}


def page(operations: Sequence[Operation]) -> str:
    """The viewer's page, listing ``operations`` for a browser without JavaScript."""
    listed = "".join(
        f"<li><code>{op.method} {html.escape(spec_path(op.path))}</code> "
        f"{html.escape(op.summary)}</li>"
        for op in operations
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>longcall API</title>"
        '<link rel=stylesheet href="docs/static/swagger-ui/swagger-ui.css">'
        '<link rel=stylesheet href="docs/static/docs.css">'
        '<link rel=icon href="docs/static/swagger-ui/favicon-32x32.png">'
        '<script src="docs/static/swagger-ui/swagger-ui-bundle.js" defer></script>'
        '<script src="docs/static/docs.js" defer></script></head><body>'
        '<div id="swagger-ui"><noscript><h1>longcall API</h1><p>The document is '
        '<a href="openapi.json">/openapi.json</a>. Send <code>Authorization: Bearer '
        "&lt;token&gt;</code> (<code>longcall tokens create</code>).</p>"
        f"<ul>{listed}</ul></noscript></div></body></html>"
    )


def routes(operations: Sequence[Operation]) -> list[BaseRoute]:
    """``GET /docs`` and the viewer's files under ``/docs/static``."""
    text = page(operations)

    async def docs(request: Request) -> Response:
        return HTMLResponse(text, headers=HEADERS)

    return [
        Route("/docs", docs, methods=["GET"]),
        Mount("/docs/static", StaticFiles(directory=STATIC), name="docs-static"),
    ]
