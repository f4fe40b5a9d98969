"""The dashboard at ``/``: the jobs, one job's story, and the buttons an operator needs; at
``/runs`` the workflow runs, and one run's story with its resume form and cancel button; at
``/schedules`` the cron schedules, and one schedule with its next fire times, latest
occurrences and pause, resume, trigger and delete buttons.

Pages are rendered here, every value from the data through :func:`html.escape`;
``static/dashboard.js`` keeps them live over the server-sent event streams and acts through the
JSON API with the login cookie, so the page can do nothing a token holder could not do with
curl, and each button shows that curl command. Nothing is loaded from anywhere but this server.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, quote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from longcall.app import App
from longcall.errors import CronNotFound, JobNotFound, RunNotFound, StoreError
from longcall.jobs import JobState
from longcall.server import cron as cron_api
from longcall.server import runs as run_api
from longcall.server.auth import COOKIE, Principal, authenticate
from longcall.server.hooks import read_body
from longcall.server.jobs import iso, job_json, visible_job
from longcall.store.runs import RunStatus

STATIC = Path(__file__).with_name("static")
PAGE_SIZE = 100
STATES = [s.value for s in JobState]
RUN_STATUSES = run_api.STATUSES
HEADERS = {
    # No inline script or style and nothing from elsewhere: even a value that slipped past
    # escaping could not run.
    "content-security-policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",  # /login?token=… must not travel in a Referer
    "cache-control": "no-store",
}
Page = Callable[[Request, App, Principal], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # the key in the request body
    label: str
    kind: Literal["json", "text", "bool"]  # parsed JSON; a string, left out when empty; a box
    default: str = ""


@dataclass(frozen=True, slots=True)
class Action:
    verb: str  # the last part of the API path: /v1/jobs/{jobId}/{verb}
    button: str
    fields: tuple[Field, ...]


ACTIONS = (
    Action(
        "progress",
        "Send progress",
        (
            Field("progress", "Progress (JSON)", "json", '{"percent": 50}'),
            Field("notifyModel", "Tell the model too (otherwise only this page sees it)", "bool"),
        ),
    ),
    Action("complete", "Complete", (Field("result", "Result (JSON)", "json", "{}"),)),
    Action("fail", "Fail", (Field("error", "Error", "text"),)),
    Action("cancel", "Cancel", (Field("reason", "Reason", "text"),)),
    Action(
        "extend",
        "Extend the deadline",
        (Field("deadline", "New deadline from now (45m, 2h, or seconds)", "text", "30m"),),
    ),
)
JOB_FIELDS = (
    ("jobId", "Job id"),
    ("toolName", "Tool"),
    ("state", "State"),
    ("delivery", "Delivery"),
    ("deadlineAt", "Deadline"),
    ("appName", "App"),
    ("userId", "User"),
    ("sessionId", "Session"),
    ("callId", "Call id"),
    ("invocationId", "Invocation id"),
    ("createdAt", "Created"),
    ("updatedAt", "Updated"),
    ("finishedAt", "Finished"),
    ("deliveredAt", "Delivered to the agent"),
    ("deliveryAttempts", "Delivery attempts"),
    ("lastError", "Last delivery error"),
    ("pendingMessage", "Pending message"),
)


# -- formatting, the same as dashboard.js does it --------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def shown(field: str, value: Any) -> str:
    """A job field as text: times in UTC to the second, structures as JSON, nothing as a dash."""
    if value is None:
        return "—"
    if field.endswith("At"):
        return str(value)[:19].replace("T", " ")
    if isinstance(value, dict | list | bool):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return str(value)


def shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def curl(url: str, body: dict[str, Any]) -> str:
    """The command that does what a button does, with the token left in an environment variable."""
    return (
        f"curl -X POST {shell(url)} \\\n"
        '  -H "Authorization: Bearer $LONGCALL_TOKEN" \\\n'
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d {shell(compact(body))}"
    )


def default_body(action: Action) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for field in action.fields:
        if field.kind == "json":
            body[field.name] = json.loads(field.default)
        elif field.kind == "bool":
            body[field.name] = False
        elif field.default:
            body[field.name] = field.default
    return body


def in_path(job_id: str) -> str:
    """A job id as one segment of a URL path (a "/" in it too)."""
    return quote(job_id, safe=":@")


def haystack(job: dict[str, Any]) -> str:
    """What the search box looks in."""
    parts = [job["jobId"], job["toolName"], job["sessionId"], job["userId"], job["callId"]]
    return " ".join([*(p or "" for p in parts), compact(job["args"])]).lower()


# -- pages ------------------------------------------------------------------------------------


def layout(title: str, main: str, who: Principal | None = None, status: int = 200) -> Response:
    account = ""
    if who is not None:
        name = "admin" if who.admin else who.user_id or ""
        account = (
            '<a href="/">Jobs</a><a href="/runs">Runs</a><a href="/schedules">Schedules</a>'
            '<span class="live" id="live">connecting…</span>'
            f'<span class="who">{escape(name)}</span><a href="/logout">Log out</a>'
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · longcall</title>
<link rel="stylesheet" href="/static/dashboard.css">
<link rel="icon" href="/static/favicon.svg">
<script src="/static/dashboard.js" defer></script>
</head><body>
<header><a class="brand" href="/">longcall</a><nav>{account}</nav></header>
{main}
</body></html>
"""
    return HTMLResponse(page, status_code=status, headers=HEADERS)


def badge(field: str, value: str) -> str:
    value = escape(value)
    return f'<span class="badge {field}-{value}" data-field="{field}">{value}</span>'


def job_row(job: dict[str, Any], hidden: bool) -> str:
    link = f'<a href="/jobs/{escape(in_path(job["jobId"]))}">{escape(job["jobId"])}</a>'
    cells = [
        link,
        escape(job["toolName"]),
        badge("state", job["state"]),
        badge("delivery", job["delivery"]),
        *(escape(shown(f, job[f])) for f in ("sessionId", "userId", "createdAt", "deadlineAt")),
    ]
    attributes = (
        f'data-job-id="{escape(job["jobId"])}" data-search="{escape(haystack(job))}"'
        f' data-updated="{escape(job["updatedAt"])}"{" hidden" if hidden else ""}'
    )
    return f"<tr {attributes}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def filter_links(state: str | None, search: str) -> str:
    links = []
    for value in [None, *STATES]:
        query = urlencode({k: v for k, v in (("state", value), ("q", search)) if v})
        current = ' aria-current="page"' if value == state else ""
        links.append(f'<a href="/?{escape(query)}"{current}>{escape(value or "all")}</a>')
    return " ".join(links)


async def jobs_page(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    state = q.get("state") if q.get("state") in STATES else None
    search = q.get("q", "")
    before = None
    if q.get("before"):
        older = await visible_job(app, who, q["before"])
        before = (older.created_at, older.job_id)
    jobs = [
        job_json(j)
        for j in await app.list_jobs_async(
            state=JobState(state) if state else None,
            user_id=None if who.admin else who.user_id,
            before=before,
            limit=PAGE_SIZE,
        )
    ]
    rows = "\n".join(job_row(j, search.lower() not in haystack(j)) for j in jobs)
    more = ""
    if len(jobs) == PAGE_SIZE:
        query = urlencode({"state": state or "", "q": search, "before": jobs[-1]["jobId"]})
        more = f'<p><a href="/?{escape(query)}">Older jobs</a></p>'
    main = f"""<main data-page="jobs" data-state="{escape(state or "")}"
 data-newest="{"" if before else "yes"}">
<h1>Jobs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="State">{filter_links(state, search)}</nav>
<form class="search" role="search" method="get" action="/">
<input type="hidden" name="state" value="{escape(state or "")}">
<input type="search" name="q" id="search" value="{escape(search)}"
 placeholder="Search ids, tools, sessions, users, arguments" aria-label="Search">
</form>
<table class="jobs"><thead><tr><th>Job</th><th>Tool</th><th>State</th><th>Delivery</th>
<th>Session</th><th>User</th><th>Created (UTC)</th><th>Deadline (UTC)</th></tr></thead>
<tbody id="jobs">{rows}</tbody></table>
<p id="empty"{" hidden" if jobs else ""}>No jobs here yet; new ones appear as they start.</p>
{more}
</main>"""
    return layout("Jobs", main, who)


def action_form(action: Action, url: str) -> str:
    inputs = []
    for f in action.fields:
        name = escape(f.name)
        if f.kind == "json":
            text = escape(f.default)
            control = f'<textarea name="{name}" data-kind="json" rows="3">{text}</textarea>'
            inputs.append(f"<label>{escape(f.label)}{control}</label>")
        elif f.kind == "bool":
            control = f'<input type="checkbox" name="{name}" data-kind="bool">'
            inputs.append(f'<label class="check">{control} {escape(f.label)}</label>')
        else:
            control = f'<input name="{name}" data-kind="text" value="{escape(f.default)}">'
            inputs.append(f"<label>{escape(f.label)}{control}</label>")
    return f"""<form class="action" data-verb="{action.verb}">
{"".join(inputs)}
<button type="submit">{escape(action.button)}</button>
<pre class="curl"><code>{escape(curl(f"{url}/{action.verb}", default_body(action)))}</code></pre>
</form>"""


async def job_page(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    data = job_json(job)
    events = await app.job_events_async(job.job_id)
    path = "/v1/jobs/" + in_path(job.job_id)
    fields = "\n".join(
        f"<dt>{escape(label)}</dt><dd>"
        + (badge(f, data[f]) if f in ("state", "delivery") else _text(f, data[f]))
        + "</dd>"
        for f, label in JOB_FIELDS
    )
    blocks = "\n".join(
        f"<h3>{name.capitalize()}</h3><pre>{_text(name, data[name])}</pre>"
        for name in ("args", "progress", "result")
    )
    log = "\n".join(
        f"<tr><td>{e.seq}</td><td>{escape(shown('createdAt', iso(e.created_at)))}"
        f"</td><td>{escape(e.kind)}</td><td><code>{escape(compact(e.data))}</code></td></tr>"
        for e in events
    )
    forms = "\n".join(
        f"<section><h3>{escape(a.button)}</h3>{action_form(a, str(request.base_url)[:-1] + path)}"
        "</section>"
        for a in ACTIONS
    )
    started = job.state is JobState.STARTED
    main = f"""<main data-page="job" data-job="{escape(json.dumps(data))}"
 data-path="{escape(path)}">
<p><a href="/">← All jobs</a></p>
<h1>{escape(job.job_id)} {badge("state", data["state"])}</h1>
<div class="columns"><section><h2>Job</h2><dl>{fields}</dl>{blocks}</section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<p class="note" id="finished"{" hidden" if started else ""}>
The job is {_text("state", data["state"])}; these change only a started job.</p>
<fieldset id="actions"{"" if started else " disabled"}>{forms}</fieldset>
<p class="note">The curl commands read your token from <code>$LONGCALL_TOKEN</code>.</p>
</section></div>
<h2>Transcript</h2><ol class="transcript" id="transcript"><li class="note">Loading…</li></ol>
<h2>Event log</h2>
<table class="log"><thead><tr><th>#</th><th>Time (UTC)</th><th>Kind</th><th>Data</th></tr>
</thead><tbody id="log">{log}</tbody></table>
</main>"""
    return layout(job.job_id, main, who)


def _text(field: str, value: Any) -> str:
    return f'<span data-field="{field}">{escape(shown(field, value))}</span>'


# -- runs -------------------------------------------------------------------------------------

RUN_FIELDS = (
    ("workflowId", "Workflow"),
    ("status", "Status"),
    ("userId", "User"),
    ("createdAt", "Created"),
    ("updatedAt", "Updated"),
    ("finishedAt", "Finished"),
    ("retryCount", "Retries so far"),
    ("retriesRemaining", "Retries left"),
    ("timeoutSecs", "Timeout per attempt (s)"),
    ("cancelRequested", "Cancel requested"),
)


def curl_delete(url: str) -> str:
    """The command the cancel button runs."""
    return f'curl -X DELETE {shell(url)} \\\n  -H "Authorization: Bearer $LONGCALL_TOKEN"'


def run_row(run: dict[str, Any]) -> str:
    link = f'<a href="/runs/{escape(in_path(run["runId"]))}">{escape(run["runId"])}</a>'
    cells = [
        link,
        escape(run["workflowId"]),
        badge("status", run["status"]),
        escape(shown("userId", run["userId"])),
        f"{run['retryCount']}/{run['maxRetries']}",
        escape(shown("createdAt", run["createdAt"])),
        escape(shown("updatedAt", run["updatedAt"])),
    ]
    return f'<tr data-run-id="{escape(run["runId"])}">' + "".join(f"<td>{c}</td>" for c in cells)


async def runs_page(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    status = q.get("status") if q.get("status") in RUN_STATUSES else None
    before = None
    if q.get("before"):
        older = await run_api.visible_run(app, who, q["before"])
        before = (older.created_at, older.run_id)
    found = await app.in_thread(
        app.store.list_runs,
        status=RunStatus(status) if status else None,
        user_id=None if who.admin else who.user_id,
        before=before,
        limit=PAGE_SIZE,
    )
    runs = [run_api.run_json(r) for r in found]
    links = []
    for value in [None, *RUN_STATUSES]:
        query = urlencode({"status": value} if value else {})
        current = ' aria-current="page"' if value == status else ""
        links.append(f'<a href="/runs?{escape(query)}"{current}>{escape(value or "all")}</a>')
    more = ""
    if len(runs) == PAGE_SIZE:
        query = urlencode({"status": status or "", "before": runs[-1]["runId"]})
        more = f'<p><a href="/runs?{escape(query)}">Older runs</a></p>'
    main = f"""<main data-page="runs" data-status="{escape(status or "")}"
 data-newest="{"" if before else "yes"}">
<h1>Runs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="Status">{" ".join(links)}</nav>
<table class="runs"><thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>User</th>
<th>Retries</th><th>Created (UTC)</th><th>Updated (UTC)</th></tr></thead>
<tbody id="runs">{"".join(run_row(r) for r in runs)}</tbody></table>
<p id="empty"{" hidden" if runs else ""}>No runs here yet; new ones appear as they are
submitted.</p>
{more}
</main>"""
    return layout("Runs", main, who)


def _deref(schema: Any, root: dict[str, Any]) -> Any:
    """A local ``$ref`` (``#/$defs/Name``, as pydantic writes them) replaced by its target."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        name = schema["$ref"].removeprefix("#/$defs/")
        return root.get("$defs", {}).get(name, schema)
    return schema


def simple_kind(schema: Any, root: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The input a value of ``schema`` gets (boolean, string, number, integer, or enum with its
    choices), or None when it needs JSON. ``X | None`` counts as X."""
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return None
    options = schema.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(o for o in options if o != {"type": "null"})
        return simple_kind(other, root)
    choices = schema.get("enum")
    if isinstance(choices, list) and choices:
        if all(isinstance(c, str | int | float | bool) or c is None for c in choices):
            return "enum", choices
        return None
    kind = schema.get("type")
    if kind in ("boolean", "string", "number", "integer"):
        return str(kind), []
    return None


def _control(
    key: str,
    prop: str,
    label: str,
    schema: dict[str, Any],
    found: tuple[str, list[Any]],
    *,
    required: bool = True,
) -> tuple[str, Any]:
    """One input of the resume form, and the value it starts with (... for none): what
    dashboard.js reads from it. An empty box of an optional property is left out."""
    kind, choices = found
    data = (
        f'data-key="{escape(key)}" data-prop="{escape(prop)}" data-kind="{kind}"'
        f"{' data-required' if required else ''}"
    )
    default = schema.get("default", ...)
    name = escape(f"{key}.{prop}" if prop else key)
    if kind == "boolean":
        checked = " checked" if default is True else ""
        control = f'<input type="checkbox" name="{name}" {data}{checked}>'
        return f'<label class="check">{control} {escape(label)}</label>', default is True
    if kind == "enum":
        options = "".join(
            f'<option value="{escape(compact(c))}"'
            f"{' selected' if c == default else ''}>{escape(str(c))}</option>"
            for c in choices
        )
        start = default if default is not ... else choices[0]
        return (
            f'<label>{escape(label)}<select name="{name}" {data}>{options}</select></label>',
            start,
        )
    if kind in ("number", "integer"):
        step = "1" if kind == "integer" else "any"
        value = "" if default is ... or default is None else escape(str(default))
        control = f'<input type="number" step="{step}" name="{name}" {data} value="{value}">'
        return f"<label>{escape(label)}{control}</label>", ... if value == "" else default
    value = "" if default is ... or default is None else str(default)
    control = f'<input type="text" name="{name}" {data} value="{escape(value)}">'
    return f"<label>{escape(label)}{control}</label>", value if value or required else ...


def resume_fields(key: str, schema: Any) -> tuple[str, Any]:
    """The inputs that answer one question, built from its JSON schema, and the answer they
    start with: an input per property of an object of simple values, one input for a simple
    value, a JSON box for anything else."""
    root = schema if isinstance(schema, dict) else {}
    target = _deref(schema, root)
    if isinstance(target, dict) and target.get("type") == "object":
        props = target.get("properties")
        kinds = {n: simple_kind(p, root) for n, p in (props or {}).items()}
        if props and all(kinds.values()) and not target.get("additionalProperties"):
            html, answer = [], {}
            required = set(target.get("required") or [])
            for prop, sub in props.items():
                sub = _deref(sub, root)
                label = sub.get("title") or prop
                kind = kinds[prop] or ("json", [])
                control, start = _control(key, prop, label, sub, kind, required=prop in required)
                html.append(control)
                if start is not ...:
                    answer[prop] = start
            return "".join(html), answer
    whole = simple_kind(target, root) if schema is not None else None
    if whole is not None:
        control, start = _control(key, "", "Answer", _deref(target, root), whole)
        return control, None if start is ... else start
    json_type = target.get("type") if isinstance(target, dict) else None
    start_text = {"object": "{}", "array": "[]"}.get(str(json_type), "null")
    control = (
        f'<label>Answer (JSON)<textarea name="{escape(key)}" data-key="{escape(key)}" '
        f'data-prop="" data-kind="json" rows="4">{start_text}</textarea></label>'
    )
    return control, json.loads(start_text)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def resume_form(url: str, pending: list[dict[str, Any]]) -> str:
    sections, body = [], {}
    for asked in pending:
        key = asked["key"]
        fields, body[key] = resume_fields(key, asked["schema"])
        refused = "".join(
            f"<li>{escape(p.get('path') or key)}: {escape(p.get('message', ''))}</li>"
            for p in asked["error"] or []
            if isinstance(p, dict)
        )
        note = f'<ul class="error">{refused}</ul>' if refused else ""
        sections.append(
            f'<fieldset class="question" data-key="{escape(key)}"><legend>'
            f"{escape(asked['prompt'] or key)} <code>{escape(key)}</code></legend>{note}{fields}"
            f"<details><summary>Schema</summary><pre>{escape(_pretty(asked['schema']))}</pre>"
            "</details></fieldset>"
        )
    return f"""<form class="action" id="resume">
{"".join(sections)}
<button type="submit">Resume</button>
<pre class="curl"><code>{escape(curl(f"{url}/resume", body))}</code></pre>
</form>"""


async def run_page(request: Request, app: App, who: Principal) -> Response:
    run = await run_api.visible_run(app, who, request.path_params["run_id"])
    data = await app.in_thread(run_api.details_json, app, run)
    events = await app.in_thread(app.store.run_events, run.run_id)
    path = "/v1/runs/" + in_path(run.run_id)
    url = str(request.base_url)[:-1] + path
    fields = "\n".join(
        f"<dt>{escape(label)}</dt><dd>"
        + (badge(f, data[f]) if f == "status" else _text(f, data[f]))
        + "</dd>"
        for f, label in RUN_FIELDS
    )
    blocks = "\n".join(
        f"<h3>{name.capitalize()}</h3><pre>{_text(name, data[name])}</pre>"
        for name in ("input", "result", "error")
    )
    errors = "".join(f"<li><code>{escape(compact(e))}</code></li>" for e in data["errors"])
    steps = "\n".join(
        f"<tr><td>{s['position']}</td><td>{escape(s['name'])}</td>"
        f"<td>{'ok' if s['ok'] else 'failed'}</td><td>{s['attempts']}</td>"
        f"<td><code>{escape(compact(s['result']))}</code></td>"
        f"<td>{escape(shown('finishedAt', s['finishedAt']))}</td></tr>"
        for s in data["steps"]
    )
    log = "\n".join(
        f"<tr><td>{e.seq}</td><td>{escape(shown('createdAt', iso(e.created_at)))}"
        f"</td><td>{escape(e.kind)}</td><td><code>{escape(compact(e.data))}</code></td></tr>"
        for e in events
    )
    pending = data["pendingInterrupts"]
    waiting = (
        resume_form(url, pending)
        if pending
        else '<p class="note">The run is not waiting for an answer.</p>'
    )
    ended = run.status.terminal
    main = f"""<main data-page="run" data-run="{escape(json.dumps(data))}"
 data-path="{escape(path)}" data-pending="{escape(_pending_key(pending))}">
<p><a href="/runs">← All runs</a></p>
<h1>{escape(run.run_id)} {badge("status", data["status"])}</h1>
<div class="columns"><section><h2>Run</h2><dl>{fields}</dl>{blocks}
<h3>Errors, one per failed attempt</h3><ol id="errors">{errors}</ol></section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<section id="answer"><h3>Answer and resume</h3>{waiting}</section>
<section><h3>Cancel</h3>
<form class="action" id="cancel"><fieldset{" disabled" if ended else ""}>
<button type="submit">Cancel the run</button></fieldset>
<pre class="curl"><code>{escape(curl_delete(url))}</code></pre></form></section>
<p class="note">The curl commands read your token from <code>$LONGCALL_TOKEN</code>.</p>
</section></div>
<h2>Steps</h2>
<table class="steps"><thead><tr><th>#</th><th>Task</th><th>Outcome</th><th>Attempts</th>
<th>Result</th><th>Finished (UTC)</th></tr></thead><tbody id="steps">{steps}</tbody></table>
<h2>Event log</h2>
<table class="log"><thead><tr><th>#</th><th>Time (UTC)</th><th>Kind</th><th>Data</th></tr>
</thead><tbody id="log">{log}</tbody></table>
</main>"""
    return layout(run.run_id, main, who)


def _pending_key(pending: list[dict[str, Any]]) -> str:
    """What the page's resume form was built for; dashboard.js rebuilds it when this changes."""
    return compact([[p["key"], p["error"]] for p in pending])


# -- schedules --------------------------------------------------------------------------------

CRON_FIELDS = (
    ("cronId", "Id"),
    ("workflowId", "Workflow"),
    ("cronExpression", "Expression"),
    ("timezone", "Time zone"),
    ("concurrencyPolicy", "While a run is active"),
    ("misfirePolicy", "Missed occurrences"),
    ("catchUpMax", "Catch up at most"),
    ("nextFireAt", "Next fire (UTC)"),
    ("lastFireAt", "Last run started for (UTC)"),
    ("executionCount", "Runs started"),
    ("activeRunCount", "Runs active"),
    ("userId", "User"),
    ("createdAt", "Created"),
    ("updatedAt", "Updated"),
)


def curl_as(method: str, url: str, body: dict[str, Any] | None = None) -> str:
    """The command a schedule's button runs (the same lines as :func:`curl` with a body)."""
    lines = [f"curl -X {method} {shell(url)}", '  -H "Authorization: Bearer $LONGCALL_TOKEN"']
    if body is not None:
        lines += ["  -H 'Content-Type: application/json'", f"  -d {shell(compact(body))}"]
    return " \\\n".join(lines)


def local_time(text: str) -> str:
    """An ISO 8601 time with its offset, to the second: 2025-03-30 03:00:00 +02:00."""
    return f"{text[:19].replace('T', ' ')} {text[19:]}"


def paused_badge(paused: bool) -> str:
    return badge("paused", "paused" if paused else "active")


def schedule_row(cron: dict[str, Any]) -> str:
    link = f'<a href="/schedules/{escape(in_path(cron["cronId"]))}">{escape(cron["name"])}</a>'
    cells = [
        link,
        *(escape(cron[f]) for f in ("workflowId", "cronExpression", "timezone")),
        escape(cron["concurrencyPolicy"]),
        paused_badge(cron["paused"]),
        escape(shown("nextFireAt", cron["nextFireAt"])),
        str(cron["activeRunCount"]),
        str(cron["executionCount"]),
    ]
    return f'<tr data-cron-id="{escape(cron["cronId"])}">' + "".join(f"<td>{c}</td>" for c in cells)


async def schedules_page(request: Request, app: App, who: Principal) -> Response:
    after = request.query_params.get("after") or None
    found = await app.crons.list_async(
        user_id=None if who.admin else who.user_id, after=after, limit=PAGE_SIZE
    )
    crons = await app.in_thread(cron_api.listed_json, app, found)
    more = ""
    if len(crons) == PAGE_SIZE:
        query = urlencode({"after": crons[-1]["name"]})
        more = f'<p><a href="/schedules?{escape(query)}">More schedules</a></p>'
    main = f"""<main data-page="schedules" data-first="{"" if after else "yes"}">
<h1>Schedules</h1>
<table class="schedules"><thead><tr><th>Name</th><th>Workflow</th><th>Expression</th>
<th>Zone</th><th>Policy</th><th>Paused</th><th>Next fire (UTC)</th><th>Active runs</th>
<th>Runs started</th></tr></thead>
<tbody id="schedules">{"".join(schedule_row(c) for c in crons)}</tbody></table>
<p id="empty"{" hidden" if crons else ""}>No schedules yet: <code>longcall cron add</code> or
<code>POST /v1/cron</code> makes one.</p>
{more}
</main>"""
    return layout("Schedules", main, who)


def next_rows(cron: dict[str, Any]) -> str:
    return "".join(
        f"<tr><td>{escape(local_time(t['local']))}</td><td>{escape(shown('fireAt', t['utc']))}"
        "</td></tr>"
        for t in cron["nextFireTimes"]
    )


def fire_rows(cron: dict[str, Any]) -> str:
    rows = []
    for f in cron["recentFires"]:
        run = "—"
        if f["runId"]:
            run = f'<a href="/runs/{escape(in_path(f["runId"]))}">{escape(f["runId"])}</a>'
        rows.append(
            f"<tr><td>{escape(shown('fireAt', f['fireAt']))}</td>"
            f"<td>{badge('outcome', f['outcome'])}</td><td>{run}</td></tr>"
        )
    return "".join(rows)


def schedule_action(name: str, button: str, command: str, disabled: bool = False) -> str:
    return f"""<section><form class="action" id="{name}"><fieldset{" disabled" if disabled else ""}>
<button type="submit">{escape(button)}</button></fieldset>
<pre class="curl"><code>{escape(command)}</code></pre></form></section>"""


async def schedule_page(request: Request, app: App, who: Principal) -> Response:
    found = await cron_api.visible_cron(app, who, request.path_params["cron_id"])
    cron = await app.in_thread(cron_api.details_json, app, found)
    path = "/v1/cron/" + in_path(found.cron_id)
    url = str(request.base_url)[:-1] + path
    fields = "\n".join(
        f"<dt>{escape(label)}</dt><dd>{_text(f, cron[f])}</dd>" for f, label in CRON_FIELDS
    )
    actions = "\n".join(
        [
            schedule_action(
                "pause", "Pause", curl_as("PATCH", url, {"paused": True}), found.paused
            ),
            schedule_action(
                "resume", "Resume", curl_as("PATCH", url, {"paused": False}), not found.paused
            ),
            schedule_action("trigger", "Run now", curl_as("POST", f"{url}/trigger")),
            schedule_action("delete", "Delete the schedule", curl_as("DELETE", url)),
        ]
    )
    main = f"""<main data-page="schedule" data-cron="{escape(json.dumps(cron))}"
 data-path="{escape(path)}">
<p><a href="/schedules">← All schedules</a></p>
<h1>{escape(found.name)} {paused_badge(found.paused)}</h1>
<div class="columns"><section><h2>Schedule</h2><dl>{fields}</dl>
<h3>Input</h3><pre>{_text("input", cron["input"])}</pre></section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<p class="note">Pausing stops nothing already running; on resuming, the occurrences missed
meanwhile go to the misfire policy. Run now starts a run under the concurrency policy.</p>
{actions}
<p class="note">The curl commands read your token from <code>$LONGCALL_TOKEN</code>.</p>
</section></div>
<h2>Next fire times</h2>
<table class="next"><thead><tr><th>In {escape(found.timezone)}</th><th>UTC</th></tr></thead>
<tbody id="next">{next_rows(cron)}</tbody></table>
<h2>Latest occurrences</h2>
<table class="fires"><thead><tr><th>Fire time (UTC)</th><th>Outcome</th><th>Run</th></tr>
</thead><tbody id="fires">{fire_rows(cron)}</tbody></table>
</main>"""
    return layout(found.name, main, who)


# -- login ------------------------------------------------------------------------------------


def login_form(message: str = "", status: int = 200) -> Response:
    error = f'<p class="error" role="alert">{escape(message)}</p>' if message else ""
    main = f"""<main class="login"><h1>Log in</h1>{error}
<p>Paste an API token; <code>longcall tokens create --user NAME</code> makes one.</p>
<form method="post" action="/login"><label>Token
<input name="token" type="password" autocomplete="off" required autofocus></label>
<button type="submit">Log in</button></form></main>"""
    return layout("Log in", main, status=status)


async def login(request: Request) -> Response:
    """``GET /login?token=…`` or the form's POST: set the cookie and go to the dashboard."""
    token = request.query_params.get("token", "")
    if request.method == "POST":
        body = await read_body(request, 4096)
        if isinstance(body, Response):
            return body
        token = parse_qs(body.decode(errors="replace")).get("token", [""])[0]
    token = token.strip()
    if not token:
        return login_form()
    app: App = request.app.state.longcall
    try:
        info = await app.in_thread(app.store.token_info, token)
    except StoreError as exc:
        return login_form(f"The store cannot be read: {exc}", 503)
    if info is None:
        return login_form("That token is unknown or revoked.", 401)
    response = RedirectResponse("/", status_code=303, headers=HEADERS)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303, headers=HEADERS)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def logged_in(handler: Page) -> Callable[[Request], Awaitable[Response]]:
    """A page for a logged-in caller; anyone else goes to /login."""

    async def endpoint(request: Request) -> Response:
        who = await authenticate(request)
        if isinstance(who, Response):
            if who.status_code == 401:
                return RedirectResponse("/login", status_code=303, headers=HEADERS)
            return who
        try:
            return await handler(request, request.app.state.longcall, who)
        except JobNotFound as exc:
            main = f'<main><h1>No such job</h1><p>{escape(str(exc))}</p><a href="/">Jobs</a></main>'
            return layout("Not found", main, who, 404)
        except RunNotFound as exc:
            text = escape(str(exc))
            main = f'<main><h1>No such run</h1><p>{text}</p><a href="/runs">Runs</a></main>'
            return layout("Not found", main, who, 404)
        except CronNotFound as exc:
            text = escape(str(exc))
            back = '<a href="/schedules">Schedules</a>'
            main = f"<main><h1>No such schedule</h1><p>{text}</p>{back}</main>"
            return layout("Not found", main, who, 404)
        except StoreError as exc:
            main = f"<main><h1>The store cannot be read</h1><p>{escape(str(exc))}</p></main>"
            return layout("Unavailable", main, who, 503)

    return endpoint


ROUTES: list[BaseRoute] = [
    Route("/", logged_in(jobs_page), methods=["GET"]),
    Route("/jobs/{job_id:path}", logged_in(job_page), methods=["GET"]),
    Route("/runs", logged_in(runs_page), methods=["GET"]),
    Route("/runs/{run_id:path}", logged_in(run_page), methods=["GET"]),
    Route("/schedules", logged_in(schedules_page), methods=["GET"]),
    Route("/schedules/{cron_id:path}", logged_in(schedule_page), methods=["GET"]),
    Route("/login", login, methods=["GET", "POST"]),
    Route("/logout", logout, methods=["GET"]),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
