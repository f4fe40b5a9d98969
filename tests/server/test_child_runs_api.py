"""Child runs over the API and the dashboard, on SQLite and PostgreSQL: a run's JSON names its
parent and lists its children; GET /v1/runs?parent= lists them, each caller seeing only its
own; cancelling the parent over the API cancels its children."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import longcall
from longcall import RunStatus, TaskContext

pytest.importorskip("longcall.server", reason="the server extra is not installed")

import httpx

from server.conftest import Api, login_cookies


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    app = longcall.App(db_url)

    @app.workflow("held")
    def held(ctx: TaskContext) -> Any:
        return ctx.recv("go")

    @app.workflow("family")
    def family(ctx: TaskContext) -> list[Any]:
        first = ctx.start_child("held", key="first")
        second = ctx.start_child("held", key="second")
        return [first.result(), second.result()]

    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Api(app, client, alice, bob, admin)
    finally:
        app.close()


def test_a_run_lists_its_children_and_a_child_names_its_parent(api: Api) -> None:
    """GET /v1/runs/{id} has ``children``; each child's JSON has ``parentRunId``; the list
    filtered by ``parent`` has the same two, oldest first, and none for bob."""
    run = api.app.submit_run("family", user_id="alice")
    api.app.continue_run(run.run_id)
    got = api.call("GET", f"/v1/runs/{run.run_id}", api.alice)
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["status"] == "sleeping" and body["parentRunId"] is None
    kids = body["children"]
    assert [k["workflowId"] for k in kids] == ["held", "held"]
    assert {k["parentRunId"] for k in kids} == {run.run_id}
    assert {k["userId"] for k in kids} == {"alice"}
    child = api.call("GET", f"/v1/runs/{kids[0]['runId']}", api.alice).json()
    assert child["parentRunId"] == run.run_id and child["children"] == []
    listed = api.call("GET", "/v1/runs", api.alice, params={"parent": run.run_id})
    assert listed.status_code == 200, listed.text
    assert [r["runId"] for r in listed.json()["runs"]] == [k["runId"] for k in kids]
    assert api.call("GET", "/v1/runs", api.bob, params={"parent": run.run_id}).json()["runs"] == []
    bad = api.call("GET", "/v1/runs", api.admin, params={"parent": "a\x00b"})
    assert bad.status_code in (400, 422), bad.text  # refused before any query


def test_cancelling_the_parent_over_the_api_cancels_its_children(api: Api) -> None:
    """DELETE /v1/runs/{parent}: the parent and both waiting children end cancelled."""
    run = api.app.submit_run("family", user_id="alice")
    api.app.continue_run(run.run_id)
    gone = api.call("DELETE", f"/v1/runs/{run.run_id}", api.alice)
    assert gone.status_code == 200, gone.text
    assert gone.json()["status"] == "cancelled"
    assert {k["status"] for k in gone.json()["children"]} == {"cancelled"}
    for kid in api.app.get_run(run.run_id).children:
        assert kid.status is RunStatus.CANCELLED


def test_the_dashboard_links_parent_and_children(api: Api) -> None:
    """The parent's page links each child; a child's page links its parent."""
    run = api.app.submit_run("family", user_id="alice")
    api.app.continue_run(run.run_id)
    kids = api.app.get_run(run.run_id).children
    base = str(api.client.base_url).rstrip("/")
    cookies = login_cookies(base, api.alice)
    page = httpx.get(f"{base}/runs/{run.run_id}", cookies=cookies)
    assert page.status_code == 200, page.text
    for kid in kids:
        assert f'href="/runs/{kid.run_id}"' in page.text
    child_page = httpx.get(f"{base}/runs/{kids[0].run_id}", cookies=cookies)
    assert f'id="parent-run" href="/runs/{run.run_id}"' in child_page.text
