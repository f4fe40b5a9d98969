"""The dashboard's jobs: the list at ``/``, searched in the store and filtered by state, and
one job's page at ``/jobs/{job_id}`` with its fields, the background run doing its work, its
transcript, its event log (with when it was created, attached and delivered) and the buttons
that progress, complete, fail, cancel or extend it; fail and cancel ask first. A job whose
delivery was orphaned or given up has a button that delivers it again."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import Job, JobState
from longcall.server.auth import Principal
from longcall.server.dashboard_page import (
    PAGE_SIZE,
    TOKEN_NOTE,
    Confirm,
    Milestone,
    api_url,
    badge,
    compact,
    curl,
    event_log,
    field_list,
    field_text,
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
from longcall.server.jobs import search_problem, visible_job
from longcall.shapes import job_json
from longcall.store.runs import Run

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
    confirm: Confirm | None = None  # an end the agent is told of: asked first


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
    Action(
        "fail",
        "Fail",
        (Field("error", "Error", "text"),),
        Confirm(
            "Fail this job?",
            "The agent is told that the job failed, with the error given. "
            "A finished job cannot be changed again.",
            "Fail the job",
        ),
    ),
    Action(
        "cancel",
        "Cancel",
        (Field("reason", "Reason", "text"),),
        Confirm(
            "Cancel this job?",
            "Its work is asked to stop, and the agent is told that the job was cancelled. "
            "A finished job cannot be changed again.",
            "Cancel the job",
        ),
    ),
    Action(
        "extend",
        "Extend the deadline",
        (Field("deadline", "New deadline from now (45m, 2h, or seconds)", "text", "30m"),),
    ),
)
# Not among ACTIONS: it serves a finished job whose answer never reached its session.
REDELIVER = Action("redeliver", "Deliver again", ())
REDELIVERABLE = ("orphaned", "failed")
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
    """What the search box looks in (the store searches the same fields: dashboard.js uses
    this to tell whether a job that changes live belongs to the results)."""
    parts = [job["jobId"], job["toolName"], job["sessionId"], job["userId"], job["callId"]]
    return " ".join([*(p or "" for p in parts), compact(job["args"])]).lower()


def job_row(job: dict[str, Any]) -> str:
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
        f' data-updated="{escape(job["updatedAt"])}"'
    )
    return table_row(attributes, cells)


def search_form(state: str | None, search: str) -> str:
    return f"""<form class="search" role="search" method="get" action="/">
<input type="hidden" name="state" value="{escape(state or "")}">
<input type="search" name="q" id="search" value="{escape(search)}" maxlength="200"
 placeholder="Search ids, tools, sessions, users, arguments" aria-label="Search">
</form>"""


def nothing_found(state: str | None, search: str) -> str:
    """What an empty list says (dashboard.js says the same after a search of its own)."""
    which = f"{state} jobs" if state else "jobs"
    if search:
        return f"No {which} match “{search}”."
    return f"No {which} here yet; new ones appear as they start."


async def jobs_page(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    state = q.get("state") or None
    search = q.get("q", "").strip()
    if state is not None and state not in STATES:
        message = f"There is no job state “{state}”. The states are: {', '.join(STATES)}."
        return refused("Jobs", message, filter_links("/", "state", STATES, None), who)
    problem = search_problem(search)
    if problem is not None:
        message = f"That search cannot be made: {problem}."
        return refused("Jobs", message, search_form(state, ""), who)
    before = None
    if q.get("before"):
        older = await visible_job(app, who, q["before"])
        before = (older.created_at, older.job_id)
    jobs = [
        job_json(j)
        for j in await app.list_jobs_async(
            state=JobState(state) if state else None,
            user_id=None if who.admin else who.user_id,
            text=search or None,
            before=before,
            limit=PAGE_SIZE,
        )
    ]
    rows = "\n".join(job_row(j) for j in jobs)
    filters = filter_links("/", "state", STATES, state, kept={"q": search})
    more = ""
    if len(jobs) == PAGE_SIZE:
        older_page = {"state": state or "", "q": search, "before": jobs[-1]["jobId"]}
        more = page_link("/", older_page, "Older jobs")
    main = f"""<main data-page="jobs" data-state="{escape(state or "")}"
 data-newest="{"" if before else "yes"}">
<h1>Jobs</h1><p class="outcome" id="outcome" role="status"></p>
<nav class="filters" aria-label="State">{filters}</nav>
{search_form(state, search)}
<table class="jobs"><thead><tr><th>Job</th><th>Tool</th><th>State</th><th>Delivery</th>
<th>Session</th><th>User</th><th>Created (UTC)</th><th>Deadline (UTC)</th></tr></thead>
<tbody id="jobs">{rows}</tbody></table>
<p id="empty" role="status"{" hidden" if jobs else ""}>{escape(nothing_found(state, search))}</p>
<div id="more">{more}</div>
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
    asks = action.confirm.attributes() if action.confirm else ""
    return f"""<form class="{form_class(action.confirm)}" data-verb="{action.verb}"{asks}>
{"".join(inputs)}
<button type="submit">{escape(action.button)}</button>
<pre class="curl"><code>{escape(command)}</code></pre>
</form>"""


def milestones(job: Job) -> list[Milestone]:
    """When the job was created, attached and delivered (its finish is in the log)."""
    found = [Milestone(job.created_at, "created", f"by the tool {job.tool_name}")]
    if job.attached_at is not None:
        text = f"to session {job.session_id}, call {job.call_id}"
        found.append(Milestone(job.attached_at, "attached", text))
    if job.delivered_at is not None:
        text = "the final response is in the session"
        found.append(Milestone(job.delivered_at, "delivered", text, late=True))
    return found


def run_links(runs: list[Run]) -> str:
    """The background runs doing the job's work, as ``<dl>`` entries."""
    return "".join(
        f'<dt>Background run</dt><dd><a href="/runs/{escape(in_path(r.run_id))}">'
        # Not badge(): its data-field would have dashboard.js fill it from the job.
        f'{escape(r.run_id)}</a> <span class="badge status-{r.status.value}">'
        f"{r.status.value}</span> "
        f'<span class="note">(workflow {escape(r.workflow_id)})</span></dd>'
        for r in runs
    )


async def job_page(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    data = job_json(job)
    events = await app.job_events_async(job.job_id)
    runs = await app.in_thread(app.store.runs_of_job, job.job_id)
    path = "/v1/jobs/" + in_path(job.job_id)
    fields = field_list(data, JOB_FIELDS, badged=("state", "delivery")) + run_links(runs)
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
<section><h3>{escape(REDELIVER.button)}</h3>
<p class="note">An orphaned or failed delivery (see the last delivery error) is sent again
once its cause is fixed, with fresh attempts.</p>
<fieldset id="redeliver"{"" if data["delivery"] in REDELIVERABLE else " disabled"}>
{action_form(REDELIVER, api_url(request, path))}</fieldset></section>
{TOKEN_NOTE}
</section></div>
<h2>Transcript</h2><ol class="transcript" id="transcript"><li class="note">Loading…</li></ol>
{event_log(events, milestones(job))}
</main>"""
    return layout(job.job_id, main, who)
