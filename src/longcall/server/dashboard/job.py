"""One job's page at ``/jobs/{job_id}``: its fields, the background run doing its work, its
transcript, its event log (with when it was created, attached and delivered) and the buttons
that progress, complete, fail, cancel or extend it; fail and cancel ask first. A job whose
delivery was orphaned or given up has a button that delivers it again.

``/live/jobs/{job_id}`` sends the page's pieces again, from the same templates, whenever the
job changes or its log grows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response

from longcall.agents import AgentEvent, TranscriptSource
from longcall.app import App
from longcall.core.jobs import Job, JobEvent
from longcall.server.api.jobs import visible_job
from longcall.server.auth import Principal
from longcall.server.change_feed import JobWatch
from longcall.server.dashboard._live import Update, stream
from longcall.server.dashboard._render import (
    Confirm,
    Milestone,
    api_url,
    compact,
    fragment,
    in_path,
    log_rows,
    page,
)
from longcall.shapes import job_json
from longcall.testing.scripted import stored_transcript


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

    def default_body(self) -> dict[str, Any]:
        """What the form sends as it is first shown (its curl command sends the same)."""
        body: dict[str, Any] = {}
        for field in self.fields:
            if field.kind == "json":
                body[field.name] = json.loads(field.default)
            elif field.kind == "bool":
                body[field.name] = False
            elif field.default:
                body[field.name] = field.default
        return body


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
            "Nothing was sent; the job is as it was.",
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
            "Nothing was sent; the job is as it was.",
        ),
    ),
    Action(
        "extend",
        "Extend the deadline",
        (Field("deadline", "New deadline from now (45m, 2h or 90s)", "text", "30m"),),
    ),
)
# Not among ACTIONS: it serves a finished job whose answer never reached its session.
REDELIVER = Action("redeliver", "Deliver again", ())
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


def _milestones(job: Job) -> list[Milestone]:
    """When the job was created, attached and delivered (its finish is in the log)."""
    found = [Milestone(job.created_at, "created", f"by the tool {job.tool_name}")]
    if job.attached_at is not None:
        text = f"to session {job.session_id}, call {job.call_id}"
        found.append(Milestone(job.attached_at, "attached", text))
    if job.delivered_at is not None:
        text = "the final response is in the session"
        found.append(Milestone(job.delivered_at, "delivered", text, late=True))
    return found


def _turn(event: AgentEvent, call_id: str | None) -> dict[str, Any]:
    """One turn of the transcript as the template shows it; the job's own call marked."""

    def mine(call: str | None) -> bool:
        return bool(call) and call == call_id

    calls = [(mine(c.id), f"→ {c.name}({compact(c.args)})") for c in event.function_calls]
    answers = [(mine(r.id), f"← {r.name}: {compact(r.response)}") for r in event.function_responses]
    tool = bool(answers) and not event.text and not calls
    kind = "tool" if tool else ("user" if event.author == "user" else "agent")
    author = "tool response" if tool else event.author
    return {"kind": kind, "author": author, "text": event.text, "lines": [*calls, *answers]}


async def _transcript(request: Request, app: App, job: Job) -> tuple[list[dict[str, Any]], str]:
    """The turns of the job's session, or none and a note saying why there are none. Read
    as ``/v1/sessions/{id}/transcript`` reads it, for the job's user."""
    if job.session_id is None:
        return [], "This job is not attached to an agent session."
    if job.user_id is None:
        return [], f"No transcript: no session {job.session_id!r}"
    session_id, user_id = job.session_id, job.user_id
    agent = request.app.state.agent
    found: Sequence[AgentEvent]
    try:
        if isinstance(agent, TranscriptSource):
            found = await agent.transcript(user_id=user_id, session_id=session_id)
        else:
            found = await app.in_thread(
                lambda: stored_transcript(app, session_id=session_id, user_id=user_id)
            )
    except Exception as exc:  # an agent runner's own errors: the page says, and goes on
        return [], f"No transcript: {exc}"
    if not found:
        return [], "The session has no events yet."
    return [_turn(e, job.call_id) for e in found], ""


async def _pieces(
    request: Request, app: App, job: Job, events: Sequence[JobEvent]
) -> dict[str, Any]:
    """What the page and its live updates are rendered from."""
    path = "/v1/jobs/" + in_path(job.job_id)
    turns, note = await _transcript(request, app, job)
    return {
        "job": job_json(job),
        "fields": JOB_FIELDS,
        "runs": await app.in_thread(app.monitor.runs_of_job, job.job_id),
        "rows": log_rows(events, _milestones(job)),
        "turns": turns,
        "note": note,
        "forms": ACTIONS,
        "redo": REDELIVER,
        "path": path,
        "url": api_url(request, path),
    }


async def job_page(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    live_url = f"/live/jobs/{in_path(job.job_id)}?state={job.state.value}"
    pieces = await _pieces(request, app, job, await app.job_events_async(job.job_id))
    return page("job_page.html", job.job_id, who, live="connecting…", live_url=live_url, **pieces)


async def job_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/jobs/{job_id}``: the page's pieces again whenever the job or its log changes.
    The action forms are sent only when the job's state moves (not to wipe what is being
    typed into them); ``?state=`` is the state the page was rendered in."""
    job_id = (await visible_job(app, who, request.path_params["job_id"])).job_id
    shown_state = request.query_params.get("state")
    seen: float | None = None  # the job's version shown
    last_seq = 0  # the newest entry of its log shown

    watch = JobWatch(request.app.state.changes, job_id)

    async def step() -> Update:
        nonlocal seen, last_seq, shown_state
        if not watch.due():
            return Update()
        job = await app.get_job_async(job_id)
        fresh = await app.job_events_async(job_id, after=last_seq)
        if job.updated_at == seen and not fresh:
            return Update()
        seen = job.updated_at
        events = await app.job_events_async(job_id)
        last_seq = max((e.seq for e in events), default=0)
        pieces = await _pieces(request, app, job, events)
        moved = job.state.value != shown_state
        shown_state = job.state.value
        html = fragment("job.html", "update", with_actions=moved, **pieces)
        return Update(html)

    return stream(request, step)
