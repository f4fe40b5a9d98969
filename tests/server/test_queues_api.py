"""/v1/queues and the queue fields of POST /v1/runs over a real server, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import longcall
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Api


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    """A live server whose App has the workflow ``echo`` and two queues."""
    app = longcall.App(db_url)

    @app.workflow("echo")
    def echo(n: int) -> int:
        return n

    app.queue("emails", concurrency=5, worker_concurrency=2, rate="100/min", priority=True)
    app.queue("plain")
    alice = app.store.create_token(user_id="alice")[1]
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Api(app, client, alice, alice, admin)
    finally:
        app.close()


def _runs(api: Api) -> int:
    return int(sql_rows(api.app.url, "SELECT count(*) FROM lc_runs")[0][0])


def test_submit_to_a_queue_with_priority_and_dedupe(api: Api) -> None:
    """A run submitted with queue, priority and dedupeId shows them; the same dedupeId while
    it is active is 409 naming it, and queues nothing."""
    body = {"workflowId": "echo", "input": 1, "queue": "emails", "priority": 3, "dedupeId": "u1"}
    got = api.call("POST", "/v1/runs", api.alice, body)
    assert got.status_code == 201, got.text
    run = got.json()
    assert (run["queue"], run["priority"], run["dedupeId"]) == ("emails", 3, "u1")
    again = api.call("POST", "/v1/runs", api.alice, {**body, "input": 2})
    assert again.status_code == 409
    assert again.json()["runId"] == run["runId"]
    assert again.json()["error"]["code"] == "duplicate_run"
    assert _runs(api) == 1


@pytest.mark.parametrize(
    ("extra", "status", "field"),
    [
        ({"queue": "nowhere"}, 404, "queue"),
        ({"queue": "plain", "priority": 2}, 422, "priority"),
        ({"priority": 2}, 422, "queue"),
        ({"dedupeId": "x"}, 422, "queue"),
        ({"queue": "emails", "priority": "high"}, 422, "priority"),
        ({"queue": "emails", "priority": 2**31}, 422, "priority"),
        ({"queue": ""}, 422, "queue"),
        ({"queue": "bad name"}, 422, "queue"),
    ],
)
def test_bad_queue_fields_are_refused_and_queue_nothing(
    api: Api, extra: dict[str, Any], status: int, field: str
) -> None:
    """An unknown queue is 404; a field the queue cannot take (or one without a queue) is
    422 naming it; no run is queued."""
    got = api.call("POST", "/v1/runs", api.alice, {"workflowId": "echo", "input": 1, **extra})
    assert got.status_code == status, got.text
    assert got.json()["error"]["field"] == field
    assert _runs(api) == 0


def test_get_queues_shows_limits_depth_and_age(api: Api) -> None:
    """GET /v1/queues lists each declared queue with its limits, counts and oldest age."""
    for i in range(3):
        api.call(
            "POST", "/v1/runs", api.alice, {"workflowId": "echo", "input": i, "queue": "emails"}
        )
    got = api.call("GET", "/v1/queues", api.alice)
    assert got.status_code == 200
    queues = {q["name"]: q for q in got.json()["queues"]}
    emails = queues["emails"]
    assert emails["limits"] == {
        "concurrency": 5,
        "workerConcurrency": 2,
        "rate": "100/60s",
        "priority": True,
    }
    assert emails["depth"] == 3 and emails["counts"] == {"queued": 3}
    assert emails["oldestQueuedAgeSecs"] >= 0
    assert queues["plain"]["depth"] == 0 and queues["plain"]["oldestQueuedAgeSecs"] is None
    assert api.call("GET", "/v1/queues", None).status_code == 401


def test_the_runs_page_shows_the_queues(unworked: Any) -> None:
    """The dashboard's runs page has a Queues panel: each queue's depth and limits."""
    app = unworked.app
    app.queue("reports", concurrency=3, rate="10/min")
    for i in range(2):
        app.submit_run("refund", {"id": str(i)}, queue="reports")
    page = unworked.page("/runs")
    assert page.status_code == 200
    panel = page.text[page.text.index('id="queues-title"') :]
    row = panel[panel.index('data-queue="reports"') :].split("</tr>")[0]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[0] == "reports" and cells[1] == "2" and cells[2] == "0"
    assert "concurrency 3" in cells[6] and "rate 10/60s" in cells[6]


def test_a_schedule_takes_a_queue(api: Api) -> None:
    """POST /v1/cron with ``queue`` stores it and shows it; an undeclared queue is 422."""
    body = {
        "name": "nightly",
        "workflowId": "echo",
        "cronExpression": "@daily",
        "input": 1,
        "concurrencyPolicy": "allow",
        "queue": "plain",
    }
    made = api.call("POST", "/v1/cron", api.admin, body)
    assert made.status_code == 201, made.text
    assert made.json()["queue"] == "plain"
    refused = api.call("POST", "/v1/cron", api.admin, {**body, "name": "x", "queue": "nowhere"})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "queue"
    fired = api.call("POST", f"/v1/cron/{made.json()['cronId']}/trigger", api.admin)
    assert fired.status_code == 202, fired.text
    (stats,) = [s for s in api.app.queue_stats() if s.queue.name == "plain"]
    assert stats.depth == 1
