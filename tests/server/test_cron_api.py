"""/v1/cron over a real server, on SQLite and PostgreSQL: create, list, change, trigger, delete.

The App runs on a fake clock (2025-03-29 12:00 UTC, the day before Berlin's clocks jump), so
fire times are exact; occurrences are fired with ``Scheduler.tick``. Every refusal is checked
to have changed nothing in the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest

import longcall
from longcall import FakeClock
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.server import create_app
from server.conftest import Api

START = 1743249600.0  # 2025-03-29T12:00:00Z


class Report(pydantic.BaseModel):
    region: str
    rows: int = 100


@dataclass
class Crons(Api):
    clock: FakeClock


def register(app: longcall.App) -> None:
    """report (takes a Report) and ping (takes nothing)."""

    @app.workflow("report")
    def report(order: Report) -> str:
        return order.region

    @app.workflow("ping")
    def ping(_: None) -> str:
        return "pong"


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Crons]:
    """A live server whose App has the workflows above; alice, bob and admin tokens."""
    clock = FakeClock(START)
    app = longcall.App(db_url, clock=clock)
    register(app)
    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Crons(app, client, alice, bob, admin, clock)
    finally:
        app.close()


def snapshot(api: Api) -> list[Any]:
    """Every schedule, occurrence and run row, read outside longcall."""
    return [
        sql_rows(api.app.url, f"SELECT * FROM {table} ORDER BY 1, 2")
        for table in ("lc_cron", "lc_cron_fires", "lc_runs")
    ]


def create(api: Api, token: str, name: str = "nightly", **body: Any) -> dict[str, Any]:
    payload = {
        "name": name,
        "workflowId": "ping",
        "cronExpression": "*/5 * * * *",
        "concurrencyPolicy": "skip",
        **body,
    }
    got = api.call("POST", "/v1/cron", token, payload)
    assert got.status_code == 201, got.text
    return dict(got.json())


# -- creating ---------------------------------------------------------------------------------


def test_create_answers_the_schedule_with_its_next_five_fire_times(api: Crons) -> None:
    """201 with the schedule, stored with the checked input; the next five fire times in the
    zone and in UTC, the first one moved past the skipped hour of Berlin's spring change."""
    created = create(
        api,
        api.alice,
        "berlin",
        workflowId="report",
        cronExpression="30 2 * * *",
        timezone="Europe/Berlin",
        input={"region": "emea"},
        misfirePolicy="catch_up",
        catchUpMax=3,
    )
    assert created["cronId"].startswith("cron-") and created["userId"] == "alice"
    assert (created["concurrencyPolicy"], created["misfirePolicy"]) == ("skip", "catch_up")
    assert created["input"] == {"region": "emea", "rows": 100}
    assert created["paused"] is False and created["catchUpMax"] == 3
    assert (created["executionCount"], created["activeRunCount"]) == (0, 0)
    assert created["lastExecution"] is None and created["recentFires"] == []
    assert created["nextFireAt"] == "2025-03-30T01:00:00+00:00"
    assert created["nextFireTimes"] == [
        {"local": "2025-03-30T03:00:00+02:00", "utc": "2025-03-30T01:00:00+00:00"},
        {"local": "2025-03-31T02:30:00+02:00", "utc": "2025-03-31T00:30:00+00:00"},
        {"local": "2025-04-01T02:30:00+02:00", "utc": "2025-04-01T00:30:00+00:00"},
        {"local": "2025-04-02T02:30:00+02:00", "utc": "2025-04-02T00:30:00+00:00"},
        {"local": "2025-04-03T02:30:00+02:00", "utc": "2025-04-03T00:30:00+00:00"},
    ]
    stored = api.app.crons.get(created["cronId"])
    assert (stored.name, stored.workflow_id, stored.expression) == (
        "berlin",
        "report",
        "30 2 * * *",
    )
    assert stored.input == {"region": "emea", "rows": 100} and stored.user_id == "alice"

    shown = api.call("GET", f"/v1/cron/{created['cronId']}", api.alice)
    assert shown.status_code == 200 and shown.json() == created
    assert api.call("GET", f"/v1/cron/{created['cronId']}", api.admin).status_code == 200


def test_another_users_schedule_is_404_everywhere_and_unchanged(api: Crons) -> None:
    """bob cannot see, change, trigger or delete alice's schedule: 404 like one that does not
    exist, and nothing changes."""
    cron_id = create(api, api.alice)["cronId"]
    before = snapshot(api)
    path = f"/v1/cron/{cron_id}"
    for method, suffix, body in [
        ("GET", "", None),
        ("PATCH", "", {"paused": True}),
        ("DELETE", "", None),
        ("POST", "/trigger", None),
    ]:
        got = api.call(method, path + suffix, api.bob, body)
        assert got.status_code == 404, (method, suffix)
        assert got.json()["error"] == {
            "code": "cron_not_found",
            "message": f"no cron schedule with id {cron_id!r}",
            "field": "cronId",
        }
    assert api.call("GET", "/v1/cron/cron-nope", api.alice).status_code == 404
    # A NUL is no id at all: 400, before anything is looked up.
    assert api.call("PATCH", "/v1/cron/cron-%00", api.alice, {"paused": True}).status_code == 400
    assert api.call("GET", "/v1/cron", api.bob).json()["crons"] == []
    assert snapshot(api) == before


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"cronExpression": "61 * * * *"}, "invalid_schedule", "cronExpression"),
        ({"cronExpression": "* * *"}, "invalid_schedule", "cronExpression"),
        ({"cronExpression": "@fortnightly"}, "invalid_schedule", "cronExpression"),
        ({"cronExpression": "0 0 30 2 *"}, "invalid_schedule", "cronExpression"),
        ({"cronExpression": ""}, "invalid_body", "cronExpression"),  # refused by the spec too
        ({"timezone": "Mars/Olympus_Mons"}, "invalid_schedule", "timezone"),
        ({"timezone": "../etc/passwd"}, "invalid_schedule", "timezone"),
        ({"timezone": ""}, "invalid_body", "timezone"),
        ({"name": "  "}, "invalid_schedule", "name"),
        ({"concurrencyPolicy": "sometimes"}, "invalid_body", "concurrencyPolicy"),
        ({"concurrencyPolicy": None}, "invalid_body", "concurrencyPolicy"),
        ({"misfirePolicy": "never"}, "invalid_body", "misfirePolicy"),
        ({"catchUpMax": -1}, "invalid_body", "catchUpMax"),
        ({"catchUpMax": 1001}, "invalid_body", "catchUpMax"),
        ({"userId": "bob"}, "invalid_body", "userId"),
        ({"every": "day"}, "invalid_body", "every"),
        ({"workflowId": "report", "input": {"rows": 1}}, "invalid_input", "input.region"),
        ({"workflowId": "report", "input": None}, "invalid_input", "input"),
    ],
)
def test_a_bad_schedule_is_422_naming_the_field_and_stores_nothing(
    api: Crons, body: dict[str, Any], code: str, field: str
) -> None:
    """A bad expression, zone, policy, count, owner or input: 422 with the field, nothing stored."""
    payload = {
        "name": "bad",
        "workflowId": "ping",
        "cronExpression": "*/5 * * * *",
        "concurrencyPolicy": "skip",
        **body,
    }
    before = snapshot(api)
    got = api.call("POST", "/v1/cron", api.alice, payload)
    assert got.status_code == 422, got.text
    assert (got.json()["error"]["code"], got.json()["error"]["field"]) == (code, field)
    assert snapshot(api) == before


def test_an_unknown_workflow_is_404_and_a_taken_name_409(api: Crons) -> None:
    """A workflow the server's App has not registered: 404 naming workflowId. A name taken, by
    alice or anyone: 409. Neither stores anything; a bad expression is named before a 404."""
    create(api, api.alice, "nightly")
    before = snapshot(api)
    base = {"cronExpression": "0 3 * * *", "concurrencyPolicy": "allow"}
    unknown = api.call("POST", "/v1/cron", api.alice, {**base, "name": "x", "workflowId": "nope"})
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "code": "workflow_not_found",
        "message": "no workflow registered as 'nope'",
        "field": "workflowId",
    }
    both = {**base, "name": "x", "workflowId": "nope", "cronExpression": "every day"}
    assert api.call("POST", "/v1/cron", api.alice, both).json()["error"]["field"] == (
        "cronExpression"
    )
    for token in (api.alice, api.bob):
        taken = api.call(
            "POST", "/v1/cron", token, {**base, "name": "nightly", "workflowId": "ping"}
        )
        assert taken.status_code == 409
        assert taken.json()["error"]["code"] == "cron_conflict"
        assert taken.json()["error"]["field"] == "name"
    assert snapshot(api) == before


def test_malformed_requests_are_4xx_and_store_nothing(api: Crons) -> None:
    """Not JSON 400, wrong content type 415, too large 413, no token 401."""
    cron_id = create(api, api.alice)["cronId"]
    before = snapshot(api)
    headers = {"authorization": f"Bearer {api.alice}", "content-type": "application/json"}
    for method, path in (("POST", "/v1/cron"), ("PATCH", f"/v1/cron/{cron_id}")):
        assert api.client.request(method, path, content=b"{no", headers=headers).status_code == 400
        big = b'{"name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        assert api.client.request(method, path, content=big, headers=headers).status_code == 413
        text = {**headers, "content-type": "text/plain"}
        assert api.client.request(method, path, content=b"{}", headers=text).status_code == 415
        assert api.call(method, path, None, {"paused": True}).status_code == 401
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/trigger")):
        assert api.call(method, f"/v1/cron/{cron_id}{suffix}", None).status_code == 401
    trigger = f"/v1/cron/{cron_id}/trigger"
    assert api.call("POST", trigger, api.alice, {"force": "lots"}).status_code == 422
    assert api.call("POST", trigger, api.alice, {"now": True}).status_code == 422
    assert snapshot(api) == before


# -- listing ----------------------------------------------------------------------------------


def test_list_pages_by_name_filters_and_shows_only_the_callers(api: Crons) -> None:
    """By name, with a cursor that walks it without repeats; workflow and paused narrow it;
    a user sees their own schedules, an admin everyone's (or one user's); bad parameters 422."""
    names = ["e", "a", "d", "b", "c"]
    for name in names:
        create(api, api.alice, name, paused=name in ("a", "d"))
    create(api, api.alice, "f", workflowId="report", input={"region": "us"})
    create(api, api.bob, "bobs")

    def listed(token: str, **params: Any) -> list[str]:
        got = api.call("GET", "/v1/cron", token, params=params)
        assert got.status_code == 200, got.text
        return [c["name"] for c in got.json()["crons"]]

    assert listed(api.alice) == ["a", "b", "c", "d", "e", "f"]
    assert listed(api.alice, workflow="report") == ["f"]
    assert listed(api.alice, paused="true") == ["a", "d"]
    assert listed(api.alice, paused="false", workflow="ping") == ["b", "c", "e"]
    assert listed(api.bob) == ["bobs"]
    assert listed(api.bob, user="alice") == ["bobs"]  # only an admin picks the user
    assert listed(api.admin) == ["a", "b", "bobs", "c", "d", "e", "f"]
    assert listed(api.admin, user="bob") == ["bobs"]

    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.call("GET", "/v1/cron", api.alice, params=params).json()
        assert len(page["crons"]) <= 2
        seen += [c["name"] for c in page["crons"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == ["a", "b", "c", "d", "e", "f"]
    one = api.call("GET", "/v1/cron", api.alice, params={"limit": 1}).json()["crons"][0]
    assert one["activeRunCount"] == 0 and one["nextFireAt"] == "2025-03-29T12:05:00+00:00"

    for params in (
        {"paused": "yes"},
        {"cursor": "!!"},
        {"limit": 0},
        {"limit": "²"},
    ):
        got = api.call("GET", "/v1/cron", api.alice, params=params)
        assert got.status_code == 422 and got.json()["error"]["field"] == next(iter(params))
    got = api.call("GET", "/v1/cron", api.alice, params={"workflow": "\x00"})
    assert got.status_code == 400 and got.json()["error"]["field"] == "workflow"


# -- changing ---------------------------------------------------------------------------------


def test_patch_pauses_resumes_and_changes_the_fields_given(api: Crons) -> None:
    """paused true, then false (next fire time kept); a new expression or zone restarts the
    schedule from now; input is checked against the workflow; an empty body changes nothing."""
    created = create(api, api.alice)
    path = f"/v1/cron/{created['cronId']}"
    paused = api.call("PATCH", path, api.alice, {"paused": True})
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert paused.json()["nextFireAt"] == created["nextFireAt"]
    assert api.app.crons.get(created["cronId"]).paused is True
    assert api.call("GET", "/v1/cron", api.alice, params={"paused": "true"}).json()["crons"]

    api.clock.advance(3600)
    resumed = api.call("PATCH", path, api.alice, {"paused": False}).json()
    assert resumed["paused"] is False
    assert resumed["nextFireAt"] == created["nextFireAt"]  # missed ones go to the misfire policy

    changed = api.call(
        "PATCH",
        path,
        api.alice,
        {
            "name": "hourly",
            "cronExpression": "0 * * * *",
            "timezone": "Asia/Kolkata",
            "workflowId": "report",
            "input": {"region": "apac"},
            "concurrencyPolicy": "queue",
            "misfirePolicy": "run_once",
            "catchUpMax": 7,
        },
    )
    assert changed.status_code == 200, changed.text
    data = changed.json()
    assert (data["name"], data["cronExpression"], data["timezone"]) == (
        "hourly",
        "0 * * * *",
        "Asia/Kolkata",
    )
    assert (data["concurrencyPolicy"], data["misfirePolicy"], data["catchUpMax"]) == (
        "queue",
        "run_once",
        7,
    )
    assert data["input"] == {"region": "apac", "rows": 100}
    # 13:00 UTC is 18:30 in Kolkata: the next whole local hour is 19:00 (13:30 UTC).
    assert data["nextFireAt"] == "2025-03-29T13:30:00+00:00"
    assert data["nextFireTimes"][0] == {
        "local": "2025-03-29T19:00:00+05:30",
        "utc": "2025-03-29T13:30:00+00:00",
    }

    same = api.call("PATCH", path, api.alice, {})
    assert same.status_code == 200 and same.json() == data
    kept = api.call("PATCH", path, api.alice, {"input": {"region": "eu"}, "name": None}).json()
    assert kept["name"] == "hourly" and kept["input"] == {"region": "eu", "rows": 100}


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"cronExpression": "* * * * * * *"}, 422, "cronExpression"),
        ({"timezone": "Nowhere/Town"}, 422, "timezone"),
        ({"name": ""}, 422, "name"),
        ({"concurrencyPolicy": "sometimes"}, 422, "concurrencyPolicy"),
        ({"catchUpMax": 5000}, 422, "catchUpMax"),
        ({"input": {"region": "x"}}, 422, "input"),  # ping takes no input
        ({"workflowId": "report"}, 422, "input"),  # the input kept (null) does not fit
        ({"workflowId": "nope"}, 404, "workflowId"),
        ({"name": "taken"}, 409, "name"),
        ({"userId": "bob"}, 422, "userId"),  # not a field a change can make
    ],
)
def test_a_refused_change_is_answered_with_the_field_and_changes_nothing(
    api: Crons, body: dict[str, Any], status: int, field: str
) -> None:
    """A bad expression or zone 422, an unknown workflow 404, a taken name 409: unchanged."""
    cron_id = create(api, api.alice)["cronId"]
    create(api, api.alice, "taken")
    before = snapshot(api)
    got = api.call("PATCH", f"/v1/cron/{cron_id}", api.alice, body)
    assert got.status_code == status, got.text
    assert got.json()["error"]["field"] == field
    assert snapshot(api) == before


# -- triggering, firing, deleting -------------------------------------------------------------


def test_trigger_starts_a_run_now_or_says_it_skipped(api: Crons) -> None:
    """A skip schedule: 202 with a run of alice's, then 200 trigger_skipped while that run is
    active (no run), then force starts another. An allow schedule starts one each time."""
    cron_id = create(api, api.alice, paused=True)["cronId"]
    path = f"/v1/cron/{cron_id}/trigger"
    first = api.call("POST", path, api.alice)
    assert first.status_code == 202, first.text
    fired = first.json()
    assert (fired["cronId"], fired["outcome"]) == (cron_id, "triggered")
    assert fired["fireAt"] == "2025-03-29T12:00:00+00:00"
    run = api.app.store.get_run(fired["runId"])
    assert (run.workflow_id, run.user_id, run.status.value) == ("ping", "alice", "queued")
    assert api.call("GET", f"/v1/runs/{run.run_id}", api.alice).status_code == 200

    api.clock.advance(1)
    runs_before = sql_rows(api.app.url, "SELECT run_id FROM lc_runs")
    skipped = api.call("POST", path, api.alice)
    assert skipped.status_code == 200
    assert (skipped.json()["outcome"], skipped.json()["runId"]) == ("trigger_skipped", None)
    assert sql_rows(api.app.url, "SELECT run_id FROM lc_runs") == runs_before

    api.clock.advance(1)
    forced = api.call("POST", path, api.alice, {"force": True})
    assert forced.status_code == 202 and forced.json()["outcome"] == "triggered"
    details = api.call("GET", f"/v1/cron/{cron_id}", api.alice).json()
    assert (details["executionCount"], details["activeRunCount"]) == (2, 2)
    assert [f["outcome"] for f in details["recentFires"]] == [
        "triggered",
        "trigger_skipped",
        "triggered",
    ]
    assert details["lastExecution"] == {
        "fireAt": "2025-03-29T12:00:02+00:00",
        "outcome": "triggered",
        "runId": forced.json()["runId"],
        "runStatus": "queued",
    }

    allow = create(api, api.alice, "allow", concurrencyPolicy="allow")["cronId"]
    for _ in range(2):
        api.clock.advance(1)
        assert api.call("POST", f"/v1/cron/{allow}/trigger", api.alice).status_code == 202
    assert api.call("GET", f"/v1/cron/{allow}", api.alice).json()["activeRunCount"] == 2


def test_the_details_follow_what_the_scheduler_fired(api: Crons) -> None:
    """An occurrence fired by the scheduler shows as the last execution with its run's status;
    the next one, skipped while that run is active, is listed but not counted."""
    cron_id = create(api, api.alice)["cronId"]
    scheduler = api.app.crons.scheduler()
    scheduler.tick(api.clock.advance(300))  # 12:05
    details = api.call("GET", f"/v1/cron/{cron_id}", api.alice).json()
    last = details["lastExecution"]
    assert (last["fireAt"], last["outcome"], last["runStatus"]) == (
        "2025-03-29T12:05:00+00:00",
        "fired",
        "queued",
    )
    assert (details["executionCount"], details["activeRunCount"]) == (1, 1)
    assert details["lastFireAt"] == "2025-03-29T12:05:00+00:00"
    assert details["nextFireAt"] == "2025-03-29T12:10:00+00:00"

    api.app.cancel_run(last["runId"])
    scheduler.tick(api.clock.advance(300))  # 12:10: the run is over, so this one fires
    scheduler.tick(api.clock.advance(300))  # 12:15: the 12:10 run is active: skipped
    details = api.call("GET", f"/v1/cron/{cron_id}", api.alice).json()
    assert [(f["fireAt"][11:16], f["outcome"]) for f in details["recentFires"]] == [
        ("12:15", "skipped"),
        ("12:10", "fired"),
        ("12:05", "fired"),
    ]
    assert details["executionCount"] == 2
    assert details["lastExecution"]["fireAt"] == "2025-03-29T12:10:00+00:00"
    first = details["recentFires"][2]["runId"]
    assert api.call("GET", f"/v1/runs/{first}", api.alice).json()["status"] == "cancelled"


def test_delete_is_204_and_the_runs_it_started_stay(api: Crons) -> None:
    """DELETE answers 204 and the schedule is gone (404 after); its run is still there."""
    cron_id = create(api, api.alice)["cronId"]
    run_id = api.call("POST", f"/v1/cron/{cron_id}/trigger", api.alice).json()["runId"]
    got = api.call("DELETE", f"/v1/cron/{cron_id}", api.alice)
    assert got.status_code == 204 and got.content == b""
    assert api.call("GET", f"/v1/cron/{cron_id}", api.alice).status_code == 404
    before = snapshot(api)
    assert api.call("DELETE", f"/v1/cron/{cron_id}", api.alice).status_code == 404
    assert snapshot(api) == before
    assert api.app.store.get_run(run_id).status.value == "queued"
    assert api.call("GET", "/v1/cron", api.alice).json()["crons"] == []


# -- the scheduler beside the server ----------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


def test_changes_wake_the_scheduler_of_the_server_process(sqlite_url: str) -> None:
    """With a scheduler in ``state.scheduler``, a create and each change wake it; reads,
    triggers and refusals do not."""
    with longcall.App(sqlite_url) as app:
        register(app)
        token = app.store.create_token(user_id="alice")[1]
        web = create_app(app)
        recorder = web.state.scheduler = Recorder()
        headers = {"authorization": f"Bearer {token}"}

        async def scenario() -> None:
            transport = httpx.ASGITransport(app=web)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://test", headers=headers
            ) as client:
                body = {"name": "n", "workflowId": "ping", "cronExpression": "@hourly"}
                assert (await client.post("/v1/cron", json=body)).status_code == 422
                assert recorder.woken == 0  # a refusal (no policy) wakes nothing
                created = await client.post("/v1/cron", json={**body, "concurrencyPolicy": "skip"})
                assert created.status_code == 201 and recorder.woken == 1
                path = "/v1/cron/" + created.json()["cronId"]
                await client.patch(path, json={"paused": True})
                await client.patch(path, json={"paused": False})
                assert recorder.woken == 3
                await client.get(path)
                await client.post(path + "/trigger")
                await client.patch(path, json={"timezone": "Nowhere"})
                assert recorder.woken == 3

        asyncio.run(scenario())
