"""The dashboard's cron schedules: the list at ``/schedules``, and one schedule's page at
``/schedules/{cron_id}`` with its next fire times, latest occurrences, and the pause, unpause,
trigger and delete buttons (delete asks first).

A paused schedule shows no next fire time: nothing fires until it is unpaused, and the times
it would have had go to its misfire policy then."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.server import cron as cron_api
from longcall.server.auth import Principal
from longcall.server.dashboard_page import (
    PAGE_SIZE,
    TOKEN_NOTE,
    Confirm,
    api_url,
    badge,
    button_form,
    curl,
    field_list,
    field_text,
    in_path,
    layout,
    page_link,
    shown,
    table_row,
)

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


PAUSED = "— (paused)"  # a paused schedule's next fire time (dashboard_runs.js says the same)
DELETE = Confirm(
    "Delete this schedule?",
    "It never fires again and its occurrences are forgotten; the runs it started go on.",
    "Delete the schedule",
)


def next_fire(cron: dict[str, Any]) -> str:
    """The next fire time as the list and the page show it: none while paused."""
    return PAUSED if cron["paused"] else shown("nextFireAt", cron["nextFireAt"])


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
        escape(next_fire(cron)),
        str(cron["activeRunCount"]),
        str(cron["executionCount"]),
    ]
    return table_row(f'data-cron-id="{escape(cron["cronId"])}"', cells)


async def schedules_page(request: Request, app: App, who: Principal) -> Response:
    after = request.query_params.get("after") or None
    found = await app.crons.list_async(
        user_id=None if who.admin else who.user_id, after=after, limit=PAGE_SIZE
    )
    crons = await app.in_thread(cron_api.listed_json, app, found)
    more = ""
    if len(crons) == PAGE_SIZE:
        more = page_link("/schedules", {"after": crons[-1]["name"]}, "More schedules")
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


def schedule_actions(url: str, paused: bool) -> str:
    buttons = [
        ("pause", "Pause", curl("PATCH", url, {"paused": True}), paused, None),
        ("unpause", "Unpause", curl("PATCH", url, {"paused": False}), not paused, None),
        ("trigger", "Run now", curl("POST", f"{url}/trigger"), False, None),
        ("delete", "Delete the schedule", curl("DELETE", url), False, DELETE),
    ]
    return "\n".join(
        f"<section>{button_form(name, text, command, disabled=off, confirm=asks)}</section>"
        for name, text, command, off, asks in buttons
    )


def schedule_fields(cron: dict[str, Any]) -> str:
    """The schedule's ``<dl>`` entries; while paused, its next fire time is none."""
    # PAUSED goes through shown() as it is (it is shorter than a time, with no "T" in it).
    return field_list({**cron, "nextFireAt": PAUSED} if cron["paused"] else cron, CRON_FIELDS)


async def schedule_page(request: Request, app: App, who: Principal) -> Response:
    found = await cron_api.visible_cron(app, who, request.path_params["cron_id"])
    cron = await app.in_thread(cron_api.details_json, app, found)
    path = "/v1/cron/" + in_path(found.cron_id)
    main = f"""<main data-page="schedule" data-cron="{escape(json.dumps(cron))}"
 data-path="{escape(path)}">
<p><a href="/schedules">← All schedules</a></p>
<h1>{escape(found.name)} {paused_badge(found.paused)}</h1>
<div class="columns"><section><h2>Schedule</h2><dl>{schedule_fields(cron)}</dl>
<h3>Input</h3><pre>{field_text("input", cron["input"])}</pre></section>
<section><h2>Actions</h2><p class="outcome" id="outcome" role="status"></p>
<p class="note">Pausing stops nothing already running; on resuming, the occurrences missed
meanwhile go to the misfire policy. Run now starts a run under the concurrency policy.</p>
{schedule_actions(api_url(request, path), found.paused)}
{TOKEN_NOTE}
</section></div>
<h2>Next fire times</h2>
<p class="note" id="next-paused"{"" if found.paused else " hidden"}>Paused: nothing fires until
the schedule is unpaused.</p>
<table class="next"{" hidden" if found.paused else ""}><thead><tr><th>In
{escape(found.timezone)}</th><th>UTC</th></tr></thead>
<tbody id="next">{"" if found.paused else next_rows(cron)}</tbody></table>
<h2>Latest occurrences</h2>
<table class="fires"><thead><tr><th>Fire time (UTC)</th><th>Outcome</th><th>Run</th></tr>
</thead><tbody id="fires">{fire_rows(cron)}</tbody></table>
</main>"""
    return layout(found.name, main, who)
