"""One workflow run's page at ``/runs/{run_id}``: its steps, event log, cancel button, a form
sending a message to its ``ctx.recv``, and the answer form for the questions it waits on
(:mod:`.answers`). A queued run whose workflow no live worker has registered says so. Its
history (time travel) lists each step; opening one shows its output and the state after it,
with a button forking the run from there (``POST /v1/runs/{run_id}/fork``), which then opens
the new run's page.

``/live/runs/{run_id}`` sends the page's pieces again, from the same templates, whenever the
run changes or its log grows, and ends once the run has completed, failed or been cancelled.
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.runs import Run, RunEvent, RunStatus
from longcall.server.api import runs as run_api
from longcall.server.auth import Principal
from longcall.server.dashboard._live import Update, stream
from longcall.server.dashboard._render import (
    Confirm,
    api_url,
    compact,
    fragment,
    in_path,
    log_rows,
    page,
    query,
)
from longcall.server.dashboard.answers import answer_form
from longcall.server.dashboard.job import Action, Field
from longcall.server.dashboard.runs import live_workflows, stranded
from longcall.shapes import history_json

CANCEL = Confirm(
    "Cancel this run?",
    "It stops at its next task call and cannot be started again; a job it does the work of is "
    "cancelled with it.",
    "Cancel the run",
    "Nothing was sent; the run goes on.",
)
FORK = Confirm(
    "Fork the run from this step?",
    "A new run starts: it reuses the steps before this one and executes this step and the ones "
    "after it with the code the workers have now, so their side effects happen again. This run "
    "is left as it is.",
    "Fork the run",
    "Nothing was started.",
)
SEND = Action(
    "messages",
    "Send a message",
    (
        Field("topic", "Topic (what the run's ctx.recv waits on)", "text"),
        Field("message", "Message (JSON)", "json", "null"),
    ),
)
RUN_FIELDS = (
    ("workflowId", "Workflow"),
    ("status", "Status"),
    ("userId", "User"),
    ("createdAt", "Created"),
    ("updatedAt", "Updated"),
    ("finishedAt", "Finished"),
    ("wakeAt", "Sleeps until"),
    ("retryCount", "Retries so far"),
    ("retriesRemaining", "Retries left"),
    ("timeoutSecs", "Timeout per attempt (s)"),
    ("cancelRequested", "Cancel requested"),
    ("forkedFrom", "Forked from"),
    ("forkedStep", "Forked at step"),
)


def _asked(data: dict[str, Any]) -> str:
    """A short name of what the answer form was built for: the questions and their refusals.
    The form is sent again only when this changes, not to wipe an answer being typed."""
    pending = [[p["key"], p["error"]] for p in data["pendingInterrupts"]]
    return hashlib.sha256(compact(pending).encode()).hexdigest()[:16]


async def _stranded(app: App, run: Run) -> bool:
    """Whether no live worker can run the run (the workers are asked only while it is queued)."""
    if run.status is not RunStatus.QUEUED:
        return False
    return stranded(run.status.value, run.workflow_id, await live_workflows(app))


async def _pieces(
    request: Request, app: App, run: Run, events: list[RunEvent], alone: bool
) -> dict[str, Any]:
    """What the page and its live updates are rendered from."""
    data = await app.in_thread(run_api.details_json, app, run)
    entries = await app.in_thread(app.run_history, run.run_id)
    path = "/v1/runs/" + in_path(run.run_id)
    url = api_url(request, path)
    pending = data["pendingInterrupts"]
    return {
        "run": data,
        "fields": RUN_FIELDS,
        "job_id": run.job_id,
        "stranded": alone,
        "form": answer_form(path, url, pending) if pending else None,
        "confirm": CANCEL,
        "history": [history_json(e) for e in entries],
        "fork": FORK,
        "send": SEND,
        "path": path,
        "url": url,
        "rows": log_rows(events),
    }


async def run_page(request: Request, app: App, who: Principal) -> Response:
    run = await run_api.visible_run(app, who, request.path_params["run_id"])
    events = await app.in_thread(app.run_event_log, run.run_id)
    pieces = await _pieces(request, app, run, events, await _stranded(app, run))
    finished = run.status.terminal
    live_url = f"/live/runs/{in_path(run.run_id)}?{query({'asked': _asked(pieces['run'])})}"
    return page(
        "run_page.html",
        run.run_id,
        who,
        live="finished" if finished else "connecting…",
        live_url=None if finished else live_url,
        **pieces,
    )


async def run_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/runs/{run_id}``: the page's pieces again whenever the run, its log or (while it
    is queued) the live workers change; ``?asked=`` names the questions the page's answer
    form was built for."""
    run_id = (await run_api.visible_run(app, who, request.path_params["run_id"])).run_id
    asked = request.query_params.get("asked")
    seen: tuple[float, bool] | None = None  # the run's version and whether stranded, shown
    last_seq = 0  # the newest entry of its log shown

    async def step() -> Update:
        nonlocal seen, last_seq, asked
        run = await app.in_thread(app.monitor.run, run_id)
        fresh = await app.in_thread(lambda: app.run_event_log(run_id, after=last_seq))
        alone = await _stranded(app, run)
        if (run.updated_at, alone) == seen and not fresh:
            return Update()
        seen = (run.updated_at, alone)
        events = await app.in_thread(app.run_event_log, run_id)
        last_seq = max((e.seq for e in events), default=0)
        pieces = await _pieces(request, app, run, events, alone)
        now_asked = _asked(pieces["run"])
        html = fragment("run.html", "update", with_answer=now_asked != asked, **pieces)
        asked = now_asked
        return Update(html, ended="finished" if run.status.terminal else None)

    return stream(request, step)
