"""The dashboard's workflow runs: the list at ``/runs``, filtered by status, and one run's page
at ``/runs/{run_id}`` with its steps, event log, cancel button, and an answer form built from
the JSON schema of each question the run waits on.

The answer form decides nothing by itself: a yes-or-no or a choice the schema gives no
default for starts unset, and the answer is shown for confirmation before it is sent. A
queued run whose workflow no live worker has registered says so, in the list and on its page.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.runs import Run, RunStatus
from longcall.server import runs as run_api
from longcall.server.auth import Principal
from longcall.server.dashboard_page import (
    PAGE_SIZE,
    TOKEN_NOTE,
    Confirm,
    api_url,
    badge,
    button_form,
    compact,
    curl,
    event_log,
    field_list,
    filter_links,
    form_class,
    in_path,
    json_blocks,
    layout,
    page_link,
    refused,
    shown,
    table_row,
)
from longcall.server.workers import runnable
from longcall.shapes import run_json

CANCEL = Confirm(
    "Cancel this run?",
    "It stops at its next task call and cannot be started again; a job it does the work of is "
    "cancelled with it.",
    "Cancel the run",
)
ANSWER = Confirm(
    "Send this answer?",
    "The run goes on with it; an answer cannot be taken back.",
    "Send the answer",
)

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


def stranded(status: str, workflow_id: str, able: set[str]) -> bool:
    """Whether a run in ``status`` waits for a worker that no live one is (``able``: the
    workflows the live workers can run)."""
    return status == RunStatus.QUEUED.value and workflow_id not in able


def no_worker_note(workflow_id: str) -> str:
    """What a stranded run's page says (dashboard_runs.js keeps the same words)."""
    return (
        f"No live worker can run the workflow “{workflow_id}”: none seen recently has "
        "registered it. The run waits until a worker whose app registers it starts "
        "(longcall worker --app …); a worker without it that takes the run fails it."
    )


def run_row(run: dict[str, Any], able: set[str]) -> str:
    link = f'<a href="/runs/{escape(in_path(run["runId"]))}">{escape(run["runId"])}</a>'
    status = badge("status", run["status"])
    if stranded(run["status"], run["workflowId"], able):
        status += ' <span class="stranded">no live worker can run it</span>'
    cells = [
        link,
        escape(run["workflowId"]),
        status,
        escape(shown("userId", run["userId"])),
        f"{run['retryCount']}/{run['maxRetries']}",
        escape(shown("createdAt", run["createdAt"])),
        escape(shown("updatedAt", run["updatedAt"])),
    ]
    return table_row(f'data-run-id="{escape(run["runId"])}"', cells)


async def runs_page(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    status = q.get("status") or None
    if status is not None and status not in run_api.STATUSES:
        message = (
            f"There is no run status “{status}”. The statuses are: {', '.join(run_api.STATUSES)}."
        )
        links = filter_links("/runs", "status", run_api.STATUSES, None)
        return refused("Runs", message, links, who)
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
    runs = [run_json(r) for r in found]
    able = runnable(await app.in_thread(app.store.live_workers))
    filters = filter_links("/runs", "status", run_api.STATUSES, status)
    more = ""
    if len(runs) == PAGE_SIZE:
        older_page = {"status": status or "", "before": runs[-1]["runId"]}
        more = page_link("/runs", older_page, "Older runs")
    main = f"""<main data-page="runs" data-status="{escape(status or "")}"
 data-newest="{"" if before else "yes"}" data-runnable="{escape(compact(sorted(able)))}">
<h1>Runs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="Status">{filters}</nav>
<table class="runs"><thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>User</th>
<th>Retries</th><th>Created (UTC)</th><th>Updated (UTC)</th></tr></thead>
<tbody id="runs">{"".join(run_row(r, able) for r in runs)}</tbody></table>
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
    """One input of the answer form, and the value it starts with (... for none): what
    dashboard_runs.js reads from it. An empty box of an optional property is left out. A yes or
    no, or a choice, starts unset unless the schema gives a default: nothing is decided for
    the person answering."""
    kind, choices = found
    data = (
        f'data-key="{escape(key)}" data-prop="{escape(prop)}" data-kind="{kind}"'
        f' data-label="{escape(label)}"{" data-required" if required else ""}'
    )
    default = schema.get("default", ...)
    name = escape(f"{key}.{prop}" if prop else key)
    if kind == "boolean":
        radios = "".join(
            f'<label class="check"><input type="radio" name="{name}" value="{value}"'
            f"{' checked' if default is answer else ''}> {text}</label>"
            for value, text, answer in (("true", "Yes", True), ("false", "No", False))
        )
        control = f'<fieldset class="choice" {data}><legend>{escape(label)}</legend>{radios}'
        return control + "</fieldset>", default if isinstance(default, bool) else ...
    if kind == "enum":
        chosen = default if default in choices else ...
        unset = "" if chosen is not ... else " selected"
        options = f'<option value=""{unset}>— choose —</option>' + "".join(
            f'<option value="{escape(compact(c))}"'
            f"{' selected' if chosen is not ... and c == chosen else ''}>{escape(str(c))}</option>"
            for c in choices
        )
        return (
            f'<label>{escape(label)}<select name="{name}" {data}>{options}</select></label>',
            chosen,
        )
    if kind in ("number", "integer"):
        step = "1" if kind == "integer" else "any"
        value = "" if default is ... or default is None else escape(str(default))
        control = f'<input type="number" step="{step}" name="{name}" {data} value="{value}">'
        return f"<label>{escape(label)}{control}</label>", ... if value == "" else default
    value = "" if default is ... or default is None else str(default)
    control = f'<input type="text" name="{name}" {data} value="{escape(value)}">'
    return f"<label>{escape(label)}{control}</label>", value if value or required else ...


def answer_fields(key: str, schema: Any) -> tuple[str, Any]:
    """The inputs that answer one question, built from its JSON schema, and the answer they
    start with (... for none yet): an input per property of an object of simple values, one
    input for a simple value, a JSON box for anything else."""
    root = schema if isinstance(schema, dict) else {}
    target = _deref(schema, root)
    if isinstance(target, dict) and target.get("type") == "object":
        props = target.get("properties")
        kinds = {n: simple_kind(p, root) for n, p in (props or {}).items()}
        if props and all(kinds.values()) and not target.get("additionalProperties"):
            html, answer = [], {}
            required = [r for r in target.get("required") or [] if r in props]
            # The required ones in the order the schema lists them, then the rest by name:
            # PostgreSQL keeps a schema as jsonb, which keeps an array's order but not the
            # order of an object's keys, and the form is the same on every store.
            rest = sorted(p for p in props if p not in required)
            order = [*dict.fromkeys(required), *rest]
            for prop in order:
                sub = _deref(props[prop], root)
                label = sub.get("title") or prop
                kind = kinds[prop] or ("json", [])
                control, start = _control(key, prop, label, sub, kind, required=prop in required)
                html.append(control)
                if start is not ...:
                    answer[prop] = start
            return "".join(html), answer
    whole = simple_kind(target, root) if schema is not None else None
    if whole is not None:
        return _control(key, "", "Answer", _deref(target, root), whole)
    json_type = target.get("type") if isinstance(target, dict) else None
    start_text = {"object": "{}", "array": "[]"}.get(str(json_type), "null")
    control = (
        f'<label>Answer (JSON)<textarea name="{escape(key)}" data-key="{escape(key)}" '
        f'data-prop="" data-kind="json" rows="4">{start_text}</textarea></label>'
    )
    return control, json.loads(start_text)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def answer_form(url: str, pending: list[dict[str, Any]]) -> str:
    sections, body = [], {}
    for asked in pending:
        key = asked["key"]
        fields, start = answer_fields(key, asked["schema"])
        if start is not ...:  # an answer not given yet is left out, not sent as null
            body[key] = start
        refusals = "".join(
            f"<li>{escape(p.get('path') or key)}: {escape(p.get('message', ''))}</li>"
            for p in asked["error"] or []
            if isinstance(p, dict)
        )
        note = f'<ul class="error">{refusals}</ul>' if refusals else ""
        sections.append(
            f'<fieldset class="question" data-key="{escape(key)}"><legend>'
            f"{escape(asked['prompt'] or key)} <code>{escape(key)}</code></legend>{note}{fields}"
            f"<details><summary>Schema</summary><pre>{escape(_pretty(asked['schema']))}</pre>"
            "</details></fieldset>"
        )
    return f"""<form class="{form_class(ANSWER, "decision")}" id="answers"{ANSWER.attributes()}>
{"".join(sections)}
<button type="submit">Answer</button>
<pre class="curl"><code>{escape(curl("POST", f"{url}/answers", body))}</code></pre>
</form>"""


def _pending_key(pending: list[dict[str, Any]]) -> str:
    """What the page's answer form was built for; dashboard_runs.js rebuilds it when this
    changes."""
    return compact([[p["key"], p["error"]] for p in pending])


# -- one run ----------------------------------------------------------------------------------


def job_link(run: Run) -> str:
    """The job whose work the run does, as a ``<dl>`` entry (none for a run of its own)."""
    if run.job_id is None:
        return ""
    link = f'<a href="/jobs/{escape(in_path(run.job_id))}">{escape(run.job_id)}</a>'
    return f"<dt>Doing the work of job</dt><dd>{link}</dd>"


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
        answer_form(url, pending)
        if pending
        else '<p class="note">The run is not waiting for an answer.</p>'
    )
    cancel = button_form(
        "cancel",
        "Cancel the run",
        curl("DELETE", url),
        disabled=run.status.terminal,
        confirm=CANCEL,
    )
    able = runnable(await app.in_thread(app.store.live_workers))
    alone = stranded(run.status.value, run.workflow_id, able)
    main = f"""<main data-page="run" data-run="{escape(json.dumps(data))}"
 data-path="{escape(path)}" data-pending="{escape(_pending_key(pending))}"
 data-runnable="{escape(compact(sorted(able)))}">
<p><a href="/runs">← All runs</a></p>
<h1>{escape(run.run_id)} {badge("status", data["status"])}</h1>
<p class="warning" id="no-worker" role="status"{"" if alone else " hidden"}>
{escape(no_worker_note(run.workflow_id))}</p>
<div class="columns"><section><h2>Run</h2><dl>{fields}{job_link(run)}</dl>{blocks}
<h3>Errors, one per failed attempt</h3><ol id="errors">{errors}</ol></section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<section id="answer"><h3>Answer</h3>{waiting}</section>
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
