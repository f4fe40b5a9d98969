"""GET /v1/runs/{runId}/history and POST /v1/runs/{runId}/fork over a real server, on SQLite
and PostgreSQL: the history's steps and states, a fork that reuses the first steps, only the
run's owner or an admin may read or fork it, and every refusal changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import longcall
from longcall import RunStatus, TaskContext
from longcall.workflows import Append
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Api


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    app = longcall.App(db_url)
    app.executed = Counter()  # type: ignore[attr-defined]

    @app.task(name="count")
    def count(i: int, ctx: TaskContext) -> int:
        app.executed[i] += 1  # type: ignore[attr-defined]
        ctx.set("seen", i)
        return i * 10

    @app.workflow("three", state={"seen": Append()})
    def three(start: int, ctx: TaskContext) -> list[int]:
        return [count(start + i) for i in range(3)]

    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Api(app, client, alice, bob, admin)
    finally:
        app.close()


def alices_run(api: Api) -> str:
    run = api.app.submit_run("three", 1, user_id="alice")
    assert api.app.continue_run(run.run_id).status is RunStatus.COMPLETED
    return run.run_id


def runs_and_steps(api: Api) -> list[Any]:
    return [
        sql_rows(api.app.url, "SELECT run_id, status FROM lc_runs ORDER BY 1"),
        sql_rows(api.app.url, "SELECT run_id, position FROM lc_run_steps ORDER BY 1, 2"),
    ]


def test_history_lists_the_steps_with_the_state_after_each(api: Api) -> None:
    run_id = alices_run(api)
    got = api.call("GET", f"/v1/runs/{run_id}/history", api.alice)
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["runId"] == run_id
    steps = body["steps"]
    assert [(s["step"], s["kind"], s["name"], s["ok"]) for s in steps] == [
        (1, "task", "count", True),
        (2, "task", "count", True),
        (3, "task", "count", True),
    ]
    assert [s["output"] for s in steps] == [10, 20, 30]
    assert [s["state"] for s in steps] == [{"seen": [1]}, {"seen": [1, 2]}, {"seen": [1, 2, 3]}]
    assert steps[0]["startedAt"].endswith("+00:00") and steps[0]["error"] is None


def test_a_fork_reuses_the_first_steps_and_a_worker_executes_the_rest(api: Api) -> None:
    run_id = alices_run(api)
    got = api.call("POST", f"/v1/runs/{run_id}/fork", api.alice, {"fromStep": 3, "input": 1})
    assert got.status_code == 201, got.text
    fork = got.json()
    assert fork["status"] == "queued" and fork["userId"] == "alice"
    assert (fork["forkedFrom"], fork["forkedStep"]) == (run_id, 3)
    assert [s["position"] for s in fork["steps"]] == [1, 2]
    done = api.app.continue_run(fork["runId"])
    assert done.status is RunStatus.COMPLETED and done.result == [10, 20, 30]
    assert api.app.executed == {1: 1, 2: 1, 3: 2}  # type: ignore[attr-defined]
    # The admin may fork anyone's run; the fork is still the owner's.
    by_admin = api.call("POST", f"/v1/runs/{run_id}/fork", api.admin, {"fromStep": 1})
    assert by_admin.status_code == 201 and by_admin.json()["userId"] == "alice"


def test_refusals_change_nothing(api: Api) -> None:
    run_id = alices_run(api)
    path = f"/v1/runs/{run_id}/fork"
    before = runs_and_steps(api)
    cases = [
        ("/v1/runs/run-nope/fork", api.admin, {"fromStep": 1}, 404, "runId"),
        (path, api.bob, {"fromStep": 1}, 404, "runId"),  # not bob's run
        (path, None, {"fromStep": 1}, 401, None),
        (path, api.alice, {"fromStep": 0}, 422, "fromStep"),
        (path, api.alice, {"fromStep": 5}, 422, "fromStep"),  # 3 steps: 1 to 4
        (path, api.alice, {"fromStep": True}, 422, "fromStep"),
        (path, api.alice, {"fromStep": "2"}, 422, "fromStep"),
        (path, api.alice, {}, 422, "fromStep"),
        (path, api.alice, {"fromStep": 1, "input": "x"}, 422, "input"),
        (path, api.alice, {"fromStep": 1, "extra": 1}, 422, "extra"),
    ]
    for where, token, body, status, field in cases:
        got = api.call("POST", where, token, body)
        assert got.status_code == status, (body, got.text)
        if field is not None:
            assert got.json()["error"]["field"] == field, got.text
    for token, status in ((api.bob, 404), (None, 401)):
        got = api.call("GET", f"/v1/runs/{run_id}/history", token)
        assert got.status_code == status, got.text
    assert api.call("GET", "/v1/runs/run-nope/history", api.admin).status_code == 404
    assert runs_and_steps(api) == before
