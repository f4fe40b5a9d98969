"""POST /v1/runs/{runId}/messages and GET /v1/runs/{runId}/values/{key} over a real server,
on SQLite and PostgreSQL: a message kept for a run and received once, an Idempotency-Key, a
published value read (and waited for), and every refusal changing nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import longcall
from longcall import RunStatus, TaskContext
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Api


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    app = longcall.App(db_url)

    @app.workflow("inbox")
    def inbox(count: int, ctx: TaskContext) -> list[Any]:
        return [ctx.recv("orders") for _ in range(count)]

    @app.workflow("publisher")
    def publisher(value: Any, ctx: TaskContext) -> None:
        ctx.set_event("status", value)

    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Api(app, client, alice, bob, admin)
    finally:
        app.close()


def messages(api: Api) -> list[Any]:
    return sql_rows(api.app.url, "SELECT run_id, seq, topic FROM lc_run_messages ORDER BY 1, 2")


def test_a_message_is_kept_and_received_once(api: Api) -> None:
    run = api.app.submit_run("inbox", 2, user_id="alice")
    path = f"/v1/runs/{run.run_id}/messages"
    key = {"Idempotency-Key": "order-1"}
    first = api.call("POST", path, api.alice, {"topic": "orders", "message": {"n": 1}}, headers=key)
    assert first.status_code == 201, first.text
    assert first.json() == {"runId": run.run_id, "topic": "orders", "seq": 1, "created": True}
    again = api.call("POST", path, api.alice, {"topic": "orders", "message": {"n": 1}}, headers=key)
    assert again.status_code == 200 and again.json()["created"] is False
    second = api.call("POST", path, api.admin, {"topic": "orders", "message": "two"})
    assert second.status_code == 201 and second.json()["seq"] == 2
    done = api.app.continue_run(run.run_id)
    assert done.status is RunStatus.COMPLETED and done.result == [{"n": 1}, "two"]


def test_refusals_change_nothing(api: Api) -> None:
    run = api.app.submit_run("inbox", 1, user_id="alice")
    path = f"/v1/runs/{run.run_id}/messages"
    before = messages(api)
    cases = [
        ("/v1/runs/run-nope/messages", api.admin, {"topic": "t"}, 404, "runId"),
        (path, api.bob, {"topic": "t"}, 404, "runId"),  # not bob's run
        (path, None, {"topic": "t"}, 401, None),
        (path, api.alice, {"topic": ""}, 422, "topic"),
        (path, api.alice, {"topic": "a\u0007b"}, 422, "topic"),
        (path, api.alice, {"message": 1}, 422, "topic"),
        (path, api.alice, {"topic": "t", "extra": 1}, 422, "extra"),
    ]
    for where, token, body, status, field in cases:
        got = api.call("POST", where, token, body)
        assert got.status_code == status, (body, got.text)
        if field is not None:
            assert got.json()["error"]["field"] == field, got.text
    long_key = {"Idempotency-Key": "k" * 300}
    got = api.call("POST", path, api.alice, {"topic": "t"}, headers=long_key)
    assert got.status_code == 422, got.text
    api.app.cancel_run(run.run_id)
    finished = api.call("POST", path, api.alice, {"topic": "orders", "message": 1})
    assert finished.status_code == 409 and "cancelled" in finished.json()["error"]["message"]
    assert messages(api) == before == []


def test_a_published_value_is_read_and_waited_for(api: Api) -> None:
    run = api.app.submit_run("publisher", {"stage": "packed"}, user_id="alice")
    path = f"/v1/runs/{run.run_id}/values/status"
    before = api.call("GET", path, api.alice)
    assert before.status_code == 200, before.text
    assert before.json() == {"runId": run.run_id, "key": "status", "found": False, "value": None}
    # A reader waiting while the run executes elsewhere sees the value once it is published.
    executor = threading.Timer(0.3, api.app.continue_run, args=(run.run_id,))
    executor.start()
    started = time.monotonic()
    waited = api.call("GET", f"{path}?wait=20s", api.alice)
    executor.join()
    assert waited.status_code == 200, waited.text
    assert waited.json()["found"] is True and waited.json()["value"] == {"stage": "packed"}
    assert time.monotonic() - started < 15  # answered when published, not at the wait's end
    assert api.call("GET", path, api.admin).json()["value"] == {"stage": "packed"}
    unpublished = api.call("GET", f"/v1/runs/{run.run_id}/values/other?wait=0.2", api.alice)
    assert unpublished.json()["found"] is False


def test_value_read_refusals(api: Api) -> None:
    run = api.app.submit_run("publisher", 1, user_id="alice")
    path = f"/v1/runs/{run.run_id}/values/status"
    cases = [
        ("/v1/runs/run-nope/values/status", api.admin, 404, "runId"),
        (path, api.bob, 404, "runId"),  # not bob's run
        (path, None, 401, None),
        (f"{path}?wait=31", api.alice, 422, "wait"),
        (f"{path}?wait=-1", api.alice, 422, "wait"),
        (f"{path}?wait=soon", api.alice, 422, "wait"),
        (f"/v1/runs/{run.run_id}/values/{'k' * 201}", api.alice, 422, "key"),
    ]
    for where, token, status, field in cases:
        got = api.call("GET", where, token)
        assert got.status_code == status, (where, got.text)
        if field is not None:
            assert got.json()["error"]["field"] == field, got.text
