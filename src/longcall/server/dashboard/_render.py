"""The dashboard's one renderer: the Jinja2 templates beside this module, autoescaped, and the
formatting they share. Pages and the fragments the live streams send come from the same
templates, so a value looks the same when the page loads and when it changes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from longcall.core.jobs import JobEvent
from longcall.core.runs import RunEvent
from longcall.server.auth import Principal
from longcall.server.dashboard.login_cookie import CSRF_FIELD, page_csrf
from longcall.shapes import iso

PAGE_SIZE = 100
HEADERS = {
    # No inline script or style and nothing from elsewhere: even a value that slipped past
    # escaping could not run. (htmx's own inline <style> is turned off in the layout.)
    "content-security-policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    # Links to elsewhere do not tell where they were followed from (a job's page names it).
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def shown(value: Any, field: str = "") -> str:
    """A field as text: times in UTC to the second, structures as JSON, nothing as a dash."""
    if value is None:
        return "—"
    if field.endswith("At"):
        return str(value)[:19].replace("T", " ")
    if isinstance(value, dict | list | bool):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return str(value)


def _shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def curl(method: str, url: str, body: dict[str, Any] | None = None) -> str:
    """The command that does what a button does, with the token left in an environment variable."""
    lines = [f"curl -X {method} {_shell(url)}", '  -H "Authorization: Bearer $LONGCALL_TOKEN"']
    if body is not None:
        lines += ["  -H 'Content-Type: application/json'", f"  -d {_shell(compact(body))}"]
    return " \\\n".join(lines)


def api_url(request: Request, path: str) -> str:
    """``path`` on this server, as the curl commands call it."""
    return str(request.base_url)[:-1] + path


def in_path(object_id: str) -> str:
    """A job, run or schedule id as one segment of a URL path (a "/" in it too)."""
    return quote(object_id, safe=":@")


def query(params: dict[str, str | None]) -> str:
    """A query string of the parameters that are not empty."""
    return urlencode({k: v for k, v in params.items() if v})


def filter_links(
    path: str,
    name: str,
    values: Sequence[str],
    current: str | None,
    *,
    kept: dict[str, str] | None = None,
) -> list[tuple[str, str, bool]]:
    """Links to ``path`` with each of ``values`` (and none: "all") as the ``name`` parameter,
    keeping the ``kept`` parameters (those that are not empty): (address, text, current)."""
    return [
        (f"{path}?{query({name: value, **(kept or {})})}", value or "all", value == current)
        for value in [None, *values]
    ]


@dataclass(frozen=True, slots=True)
class Confirm:
    """What a button that cannot be taken back asks before it acts (dashboard.js asks it in
    the page's dialog): the question, what follows from a yes, and the words of the button
    that says yes. The other button, focused first, says no, and the page then says
    ``declined``."""

    question: str
    detail: str
    yes: str
    declined: str


@dataclass(frozen=True, slots=True)
class Milestone:
    """A moment in an object's life that its row records but its event log does not (a job's
    creation, attachment, delivery): shown in the log among the entries, by time."""

    at: float
    kind: str
    text: str
    late: bool = False  # after the log's entries of the same moment, not before them


@dataclass(frozen=True, slots=True)
class LogRow:
    """A row of an event log: an entry (with its seq) or a milestone (with its kind)."""

    at: str
    kind: str
    data: str
    seq: int | None = None


def log_rows(
    events: Sequence[JobEvent | RunEvent], milestones: Sequence[Milestone] = ()
) -> list[LogRow]:
    """The event log's rows, entries and ``milestones`` in time order."""
    rows: list[tuple[float, int, LogRow]] = [
        (e.created_at, 1, LogRow(iso(e.created_at) or "", e.kind, compact(e.data), e.seq))
        for e in events
    ]
    rows += [
        (m.at, 2 if m.late else 0, LogRow(iso(m.at) or "", m.kind, m.text)) for m in milestones
    ]
    rows.sort(key=lambda row: row[:2])
    return [row for _, _, row in rows]


_env = Environment(
    loader=PackageLoader("longcall.server.dashboard", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_env.filters.update(shown=shown, compact=compact, in_path=in_path, query=query)
_env.globals.update(curl=curl, csrf_field=CSRF_FIELD)


def fragment(template: str, macro: str, /, **values: Any) -> Markup:
    """One macro of a template, rendered: a piece of a page, for the page or a live update."""
    found: Markup = getattr(_env.get_template(template).module, macro)(**values)
    return found


def page(
    template: str,
    title: str,
    who: Principal | None,
    *,
    status: int = 200,
    live: str | None = None,
    **values: Any,
) -> Response:
    """A whole page: ``template`` in the layout, with the header a logged-in caller sees.
    ``live`` is what the header says of the page's live updates (none: it has none)."""
    name = None if who is None else ("admin" if who.admin else who.user_id or "")
    html = _env.get_template(template).render(
        title=title, who=name, csrf=page_csrf.get() if who else None, live=live, **values
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def message_page(
    title: str,
    heading: str,
    text: str,
    who: Principal | None,
    status: int,
    *,
    back: tuple[str, str] | None = None,
    error: bool = False,
) -> Response:
    """A page that only says something: a refusal, an object not found, a store down."""
    return page(
        "message.html",
        title,
        who,
        status=status,
        heading=heading,
        text=text,
        back=back,
        error=error,
    )
