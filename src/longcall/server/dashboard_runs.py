"""The dashboard's workflow runs: the list at ``/runs``, filtered by status, and one run's page
at ``/runs/{run_id}`` with its steps, event log, cancel button, and a resume form built from
the JSON schema of each question the run waits on."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.server import runs as run_api
from longcall.server.auth import Principal
from longcall.server.dashboard_page import (
    PAGE_SIZE,
    TOKEN_NOTE,
    api_url,
    badge,
    button_form,
    compact,
    curl,
    event_log,
    field_list,
    filter_links,
    in_path,
    json_blocks,
    layout,
    page_link,
    shown,
    table_row,
)
from longcall.store.runs import RunStatus

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
    return table_row(f'data-run-id="{escape(run["runId"])}"', cells)


async def runs_page(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    status = q.get("status") if q.get("status") in run_api.STATUSES else None
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
    filters = filter_links("/runs", "status", run_api.STATUSES, status)
    more = ""
    if len(runs) == PAGE_SIZE:
        older_page = {"status": status or "", "before": runs[-1]["runId"]}
        more = page_link("/runs", older_page, "Older runs")
    main = f"""<main data-page="runs" data-status="{escape(status or "")}"
 data-newest="{"" if before else "yes"}">
<h1>Runs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="Status">{filters}</nav>
<table class="runs"><thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>User</th>
<th>Retries</th><th>Created (UTC)</th><th>Updated (UTC)</th></tr></thead>
<tbody id="runs">{"".join(run_row(r) for r in runs)}</tbody></table>
<p id="empty"{" hidden" if runs else ""}>No runs here yet; new ones appear as they are
submitted.</p>
{more}
</main>"""
    return layout("Runs", main, who)


# -- the resume form --------------------------------------------------------------------------


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
<pre class="curl"><code>{escape(curl("POST", f"{url}/resume", body))}</code></pre>
</form>"""


def _pending_key(pending: list[dict[str, Any]]) -> str:
    """What the page's resume form was built for; dashboard.js rebuilds it when this changes."""
    return compact([[p["key"], p["error"]] for p in pending])


# -- one run ----------------------------------------------------------------------------------


async def run_page(request: Request, app: App, who: Principal) -> Response:
    run = await run_api.visible_run(app, who, request.path_params["run_id"])
    data = await app.in_thread(run_api.details_json, app, run)
    events = await app.in_thread(app.store.run_events, run.run_id)
    path = "/v1/runs/" + in_path(run.run_id)
    url = api_url(request, path)
    fields = field_list(data, RUN_FIELDS, badged=("status",))
    blocks = json_blocks(data, ("input", "result", "error"))
    errors = "".join(f"<li><code>{escape(compact(e))}</code></li>" for e in data["errors"])
    steps = "\n".join(
        f"<tr><td>{s['position']}</td><td>{escape(s['name'])}</td>"
        f"<td>{'ok' if s['ok'] else 'failed'}</td><td>{s['attempts']}</td>"
        f"<td><code>{escape(compact(s['result']))}</code></td>"
        f"<td>{escape(shown('finishedAt', s['finishedAt']))}</td></tr>"
        for s in data["steps"]
    )
    pending = data["pendingInterrupts"]
    waiting = (
        resume_form(url, pending)
        if pending
        else '<p class="note">The run is not waiting for an answer.</p>'
    )
    cancel = button_form(
        "cancel", "Cancel the run", curl("DELETE", url), disabled=run.status.terminal
    )
    main = f"""<main data-page="run" data-run="{escape(json.dumps(data))}"
 data-path="{escape(path)}" data-pending="{escape(_pending_key(pending))}">
<p><a href="/runs">← All runs</a></p>
<h1>{escape(run.run_id)} {badge("status", data["status"])}</h1>
<div class="columns"><section><h2>Run</h2><dl>{fields}</dl>{blocks}
<h3>Errors, one per failed attempt</h3><ol id="errors">{errors}</ol></section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<section id="answer"><h3>Answer and resume</h3>{waiting}</section>
<section><h3>Cancel</h3>
{cancel}</section>
{TOKEN_NOTE}
</section></div>
<h2>Steps</h2>
<table class="steps"><thead><tr><th>#</th><th>Task</th><th>Outcome</th><th>Attempts</th>
<th>Result</th><th>Finished (UTC)</th></tr></thead><tbody id="steps">{steps}</tbody></table>
{event_log(events)}
</main>"""
    return layout(run.run_id, main, who)
