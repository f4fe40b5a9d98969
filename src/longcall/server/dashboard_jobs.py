"""The dashboard's jobs: the list at ``/``, searchable and filtered by state, and one job's
page at ``/jobs/{job_id}`` with its fields, transcript, event log and the buttons that
progress, complete, fail, cancel or extend it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.jobs import JobState
from longcall.server.auth import Principal
from longcall.server.dashboard_page import (
    PAGE_SIZE,
    TOKEN_NOTE,
    api_url,
    badge,
    compact,
    curl,
    event_log,
    field_list,
    field_text,
    filter_links,
    in_path,
    json_blocks,
    layout,
    page_link,
    shown,
    table_row,
)
from longcall.server.jobs import job_json, visible_job

STATES = [s.value for s in JobState]


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


def haystack(job: dict[str, Any]) -> str:
    """What the search box looks in."""
    parts = [job["jobId"], job["toolName"], job["sessionId"], job["userId"], job["callId"]]
    return " ".join([*(p or "" for p in parts), compact(job["args"])]).lower()


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
    return table_row(attributes, cells)


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
    filters = filter_links("/", "state", STATES, state, kept={"q": search})
    more = ""
    if len(jobs) == PAGE_SIZE:
        older_page = {"state": state or "", "q": search, "before": jobs[-1]["jobId"]}
        more = page_link("/", older_page, "Older jobs")
    main = f"""<main data-page="jobs" data-state="{escape(state or "")}"
 data-newest="{"" if before else "yes"}">
<h1>Jobs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="State">{filters}</nav>
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
    command = curl("POST", f"{url}/{action.verb}", default_body(action))
    return f"""<form class="action" data-verb="{action.verb}">
{"".join(inputs)}
<button type="submit">{escape(action.button)}</button>
<pre class="curl"><code>{escape(command)}</code></pre>
</form>"""


async def job_page(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    data = job_json(job)
    events = await app.job_events_async(job.job_id)
    path = "/v1/jobs/" + in_path(job.job_id)
    fields = field_list(data, JOB_FIELDS, badged=("state", "delivery"))
    blocks = json_blocks(data, ("args", "progress", "result"))
    forms = "\n".join(
        f"<section><h3>{escape(a.button)}</h3>{action_form(a, api_url(request, path))}</section>"
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
The job is {field_text("state", data["state"])}; these change only a started job.</p>
<fieldset id="actions"{"" if started else " disabled"}>{forms}</fieldset>
{TOKEN_NOTE}
</section></div>
<h2>Transcript</h2><ol class="transcript" id="transcript"><li class="note">Loading…</li></ol>
{event_log(events)}
</main>"""
    return layout(job.job_id, main, who)
