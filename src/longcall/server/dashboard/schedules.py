"""The dashboard's cron schedules: the list at ``/schedules``, and one schedule's page at
``/schedules/{cron_id}`` with its next fire times, latest occurrences, and the pause, unpause,
trigger and delete buttons (delete asks first). Their live streams under ``/live/schedules``
look again every two seconds and send what changed.

A paused schedule shows no next fire time: nothing fires until it is unpaused, and the times
it would have had go to its misfire policy then."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.server.api import cron as cron_api
from longcall.server.auth import Principal
from longcall.server.dashboard._live import Update, stream
from longcall.server.dashboard._poll import Throttle
from longcall.server.dashboard._render import (
    PAGE_SIZE,
    Confirm,
    api_url,
    fragment,
    in_path,
    page,
    query,
    shown,
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
PAUSED = "— (paused)"  # a paused schedule's next fire time
DELETE = Confirm(
    "Delete this schedule?",
    "It never fires again and its occurrences are forgotten; the runs it started go on.",
    "Delete the schedule",
    "Nothing was sent; the schedule is as it was.",
)


def next_fire(cron: dict[str, Any]) -> str:
    """The next fire time as the list and the page show it: none while paused."""
    return PAUSED if cron["paused"] else shown(cron["nextFireAt"], "nextFireAt")


def local_time(text: str) -> str:
    """An ISO 8601 time with its offset, to the second: 2025-03-30 03:00:00 +02:00."""
    return f"{text[:19].replace('T', ' ')} {text[19:]}"


async def _listed(app: App, who: Principal, after: str | None) -> list[dict[str, Any]]:
    found = await app.crons.list_async(
        user_id=None if who.admin else who.user_id, after=after, limit=PAGE_SIZE
    )
    return await app.in_thread(cron_api.listed_json, app, found)


async def schedules_page(request: Request, app: App, who: Principal) -> Response:
    after = request.query_params.get("after") or None
    crons = await _listed(app, who, after)
    more = {"after": crons[-1]["name"]} if len(crons) == PAGE_SIZE else None
    return page(
        "schedules_page.html",
        "Schedules",
        who,
        live="connecting…",
        live_url=f"/live/schedules?{query({'after': after})}",
        crons=[(c, next_fire(c)) for c in crons],
        more=more,
    )


async def schedules_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/schedules``: the list's rows again whenever they change."""
    after = request.query_params.get("after") or None
    throttle = Throttle()
    sent: dict[str, str] | None = None  # cron id -> its row as last sent, in the list's order

    async def step() -> Update:
        nonlocal sent
        if not throttle.due():
            return Update()
        crons = [(c, next_fire(c)) for c in await _listed(app, who, after)]
        rows = {
            c["cronId"]: str(fragment("schedules.html", "row", cron=c, next_fire=n))
            for c, n in crons
        }
        if sent is not None and list(rows.items()) == list(sent.items()):
            return Update()
        changed = {i for i, row in rows.items() if sent is not None and sent.get(i) != row}
        sent = rows
        return Update(fragment("schedules.html", "update", crons=crons, changed=changed))

    return stream(request, step)


async def _pieces(request: Request, app: App, cron_id: str, who: Principal) -> dict[str, Any]:
    """What the page and its live updates are rendered from."""
    found = await cron_api.visible_cron(app, who, cron_id)
    cron = await app.in_thread(cron_api.details_json, app, found)
    path = "/v1/cron/" + in_path(found.cron_id)
    return {
        "cron": cron,
        # PAUSED is shown as it is (it is shorter than a time, with no "T" in it).
        "fields": {**cron, "nextFireAt": PAUSED} if cron["paused"] else cron,
        "labels": CRON_FIELDS,
        "local_times": [local_time(t["local"]) for t in cron["nextFireTimes"]],
        "delete": DELETE,
        "path": path,
        "url": api_url(request, path),
    }


async def schedule_page(request: Request, app: App, who: Principal) -> Response:
    pieces = await _pieces(request, app, request.path_params["cron_id"], who)
    cron = pieces["cron"]
    live_url = f"/live/schedules/{in_path(cron['cronId'])}"
    return page(
        "schedule_page.html", cron["name"], who, live="connecting…", live_url=live_url, **pieces
    )


async def schedule_live(request: Request, app: App, who: Principal) -> Response:
    """``/live/schedules/{cron_id}``: the page's pieces again whenever they change."""
    cron_id = (await cron_api.visible_cron(app, who, request.path_params["cron_id"])).cron_id
    throttle = Throttle()
    sent: Markup | None = None

    async def step() -> Update:
        nonlocal sent
        if not throttle.due():
            return Update()
        html = fragment("schedule.html", "update", **await _pieces(request, app, cron_id, who))
        if html == sent:
            return Update()
        sent = html
        return Update(html)

    return stream(request, step)
