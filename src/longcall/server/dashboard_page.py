"""What every dashboard page shares: the layout and its headers, and the pieces the jobs, runs
and schedules pages are built from.

Every value from the data goes through :func:`html.escape`, and is formatted the same way
``static/dashboard.js`` formats it when it updates the page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from longcall.core.jobs import JobEvent
from longcall.server.auth import Principal
from longcall.server.login_cookie import CSRF_FIELD, page_csrf
from longcall.shapes import iso
from longcall.store.runs import RunEvent

PAGE_SIZE = 100
HEADERS = {
    # No inline script or style and nothing from elsewhere: even a value that slipped past
    # escaping could not run.
    "content-security-policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    # Links to elsewhere do not tell where they were followed from (a job's page names it).
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
TOKEN_NOTE = (
    '<p class="note">The curl commands read your token from <code>$LONGCALL_TOKEN</code>.</p>'
)


# -- formatting, the same as dashboard.js does it --------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def shown(field: str, value: Any) -> str:
    """A field as text: times in UTC to the second, structures as JSON, nothing as a dash."""
    if value is None:
        return "—"
    if field.endswith("At"):
        return str(value)[:19].replace("T", " ")
    if isinstance(value, dict | list | bool):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return str(value)


def shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def curl(method: str, url: str, body: dict[str, Any] | None = None) -> str:
    """The command that does what a button does, with the token left in an environment variable."""
    lines = [f"curl -X {method} {shell(url)}", '  -H "Authorization: Bearer $LONGCALL_TOKEN"']
    if body is not None:
        lines += ["  -H 'Content-Type: application/json'", f"  -d {shell(compact(body))}"]
    return " \\\n".join(lines)


def api_url(request: Request, path: str) -> str:
    """``path`` on this server, as the curl commands call it."""
    return str(request.base_url)[:-1] + path


def in_path(object_id: str) -> str:
    """A job, run or schedule id as one segment of a URL path (a "/" in it too)."""
    return quote(object_id, safe=":@")


# -- pieces of pages --------------------------------------------------------------------------


def layout(title: str, main: str, who: Principal | None = None, status: int = 200) -> Response:
    account, csrf_meta = "", ""
    if who is not None:
        name = "admin" if who.admin else who.user_id or ""
        account = (
            '<a href="/">Jobs</a><a href="/runs">Runs</a><a href="/schedules">Schedules</a>'
            '<span class="live" id="live">connecting…</span>'
            f'<span class="who">{escape(name)}</span>'
        )
    csrf = page_csrf.get()
    if who is not None and csrf:
        # dashboard.js sends it with every change it asks for; the logout form posts it.
        csrf_meta = f'<meta name="csrf-token" content="{escape(csrf)}">\n'
        account += (
            '<form class="logout" method="post" action="/logout">'
            f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(csrf)}">'
            '<button type="submit">Log out</button></form>'
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
{csrf_meta}<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · longcall</title>
<link rel="stylesheet" href="/static/dashboard.css">
<link rel="icon" href="/static/favicon.svg">
<script src="/static/dashboard.js" defer></script>
<script src="/static/dashboard_runs.js" defer></script>
</head><body>
<header><a class="brand" href="/">longcall</a><nav>{account}</nav></header>
{main}
</body></html>
"""
    return HTMLResponse(page, status_code=status, headers=HEADERS)


def badge(field: str, value: str) -> str:
    value = escape(value)
    return f'<span class="badge {field}-{value}" data-field="{field}">{value}</span>'


def field_text(field: str, value: Any) -> str:
    """A value dashboard.js finds by its field name and replaces when the data changes."""
    return f'<span data-field="{field}">{escape(shown(field, value))}</span>'


def field_list(
    data: dict[str, Any], labels: Iterable[tuple[str, str]], badged: Iterable[str] = ()
) -> str:
    """The ``<dl>`` entries of an object's fields, the ``badged`` ones as badges."""
    return "\n".join(
        f"<dt>{escape(label)}</dt><dd>"
        + (badge(f, data[f]) if f in badged else field_text(f, data[f]))
        + "</dd>"
        for f, label in labels
    )


def json_blocks(data: dict[str, Any], names: Iterable[str]) -> str:
    """A heading and the value, as JSON, for each of the structured fields ``names``."""
    return "\n".join(
        f"<h3>{name.capitalize()}</h3><pre>{field_text(name, data[name])}</pre>" for name in names
    )


def table_row(attributes: str, cells: Iterable[str]) -> str:
    return f"<tr {attributes}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def filter_links(
    path: str,
    name: str,
    values: Sequence[str],
    current: str | None,
    *,
    kept: dict[str, str] | None = None,
) -> str:
    """Links to ``path`` with each of ``values`` (and none: "all") as the ``name`` parameter,
    keeping the ``kept`` parameters (those that are not empty)."""
    links = []
    for value in [None, *values]:
        params = ((name, value), *(kept or {}).items())
        query = urlencode({k: v for k, v in params if v})
        here = ' aria-current="page"' if value == current else ""
        links.append(f'<a href="{path}?{escape(query)}"{here}>{escape(value or "all")}</a>')
    return " ".join(links)


def page_link(path: str, params: dict[str, str], text: str) -> str:
    """The link to the next page of a list."""
    return f'<p><a href="{path}?{escape(urlencode(params))}">{text}</a></p>'


@dataclass(frozen=True, slots=True)
class Confirm:
    """What a button that cannot be taken back asks before it acts (dashboard.js asks it in a
    dialog): the question, what follows from a yes, and the words of the button that says
    yes. The other button, focused first, says no."""

    question: str
    detail: str
    yes: str

    def attributes(self) -> str:
        return (
            f' data-confirm="{escape(self.question)}"'
            f' data-confirm-detail="{escape(self.detail)}" data-confirm-yes="{escape(self.yes)}"'
        )


def form_class(confirm: Confirm | None, kind: str = "danger") -> str:
    """The classes of an action form: one that asks first is marked ``kind`` (``danger``
    for an end, ``decision`` for an answer) and looks apart from the harmless ones."""
    return "action" if confirm is None else f"action {kind}"


def button_form(
    name: str,
    button: str,
    command: str,
    *,
    disabled: bool = False,
    confirm: Confirm | None = None,
) -> str:
    """A form of one button, beside the curl command that does the same; with ``confirm``,
    the button asks first."""
    asks = confirm.attributes() if confirm else ""
    return f"""<form class="{form_class(confirm)}" id="{name}"{asks}>
<fieldset{" disabled" if disabled else ""}><button type="submit">{escape(button)}</button>
</fieldset><pre class="curl"><code>{escape(command)}</code></pre></form>"""


def refused(title: str, message: str, body: str, who: Principal) -> Response:
    """A list page asked for with a query it cannot answer: 400, the reason, and ``body``
    (the links to ask again)."""
    main = f"""<main><h1>{escape(title)}</h1>
<p class="error" role="alert" id="refused">{escape(message)}</p>{body}</main>"""
    return layout(title, main, who, 400)


@dataclass(frozen=True, slots=True)
class Milestone:
    """A moment in an object's life that its row records but its event log does not (a job's
    creation, attachment, delivery): shown in the log among the entries, by time."""

    at: float
    kind: str
    text: str
    late: bool = False  # after the log's entries of the same moment, not before them


def event_log(events: Sequence[JobEvent | RunEvent], milestones: Sequence[Milestone] = ()) -> str:
    """The event log table, entries and ``milestones`` in time order. Each row has its time
    in ``data-at``; an entry's row its seq in ``data-seq``, a milestone's its kind in
    ``data-milestone`` (dashboard.js adds rows where they belong, and each milestone once)."""
    rows: list[tuple[float, int, str]] = []
    for e in events:
        at = iso(e.created_at)
        rows.append(
            (
                e.created_at,
                1,
                f'<tr data-seq="{e.seq}" data-at="{escape(at or "")}"><td>{e.seq}</td>'
                f"<td>{escape(shown('createdAt', at))}</td><td>{escape(e.kind)}</td>"
                f"<td><code>{escape(compact(e.data))}</code></td></tr>",
            )
        )
    for m in milestones:
        at = iso(m.at)
        rows.append(
            (
                m.at,
                2 if m.late else 0,
                f'<tr class="milestone" data-milestone="{escape(m.kind)}" '
                f'data-at="{escape(at or "")}"><td></td><td>{escape(shown("createdAt", at))}'
                f"</td><td>{escape(m.kind)}</td><td>{escape(m.text)}</td></tr>",
            )
        )
    rows.sort(key=lambda row: row[:2])
    body = "\n".join(html for _, _, html in rows)
    return f"""<h2>Event log</h2>
<table class="log"><thead><tr><th>#</th><th>Time (UTC)</th><th>Kind</th><th>Data</th></tr>
</thead><tbody id="log">{body}</tbody></table>"""
