"""/v1/jobs over a real server: tokens, per-user scoping, actions, bad input."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from longcall import CallIds, JobState, job_id_for
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")
from server.conftest import Api

# The api fixture's jobs, in their owners' namespaces.
CSV = job_id_for("export:csv", "alice")
JSON_ID = job_id_for("export:json", "bob")


@pytest.mark.parametrize("token", [None, "lc_nope_nope", "not-a-bearer"])
def test_missing_or_unknown_token_is_401(api: Api, token: str | None) -> None:
    """No token, an unknown one, or a malformed header: 401 with a Bearer challenge."""
    headers = {"authorization": token} if token == "not-a-bearer" else {}
    got = (
        api.client.get("/v1/jobs", headers=headers)
        if token != "lc_nope_nope"
        else api.call("GET", "/v1/jobs", token)
    )
    assert got.status_code == 401
    assert got.headers["www-authenticate"] == "Bearer"
    assert got.json()["error"]["code"] == "unauthorized"


def test_a_user_sees_only_their_jobs_and_admin_sees_all(api: Api) -> None:
    """alice lists her job only; bob's job answers 404 to her; the admin lists both."""
    mine = api.call("GET", "/v1/jobs", api.alice).json()
    assert [j["jobId"] for j in mine["jobs"]] == [CSV]
    assert mine["jobs"][0]["userId"] == "alice" and mine["jobs"][0]["state"] == "started"
    assert api.call("GET", f"/v1/jobs/{JSON_ID}", api.alice).status_code == 404
    assert api.call("GET", "/v1/jobs/export:nope", api.alice).status_code == 404
    everyone = api.call("GET", "/v1/jobs", api.admin).json()
    assert sorted(j["jobId"] for j in everyone["jobs"]) == [CSV, JSON_ID]


def test_another_users_job_cannot_be_changed(api: Api) -> None:
    """alice completing bob's job gets 404 and bob's job stays started."""
    got = api.call("POST", f"/v1/jobs/{JSON_ID}/complete", api.alice, {"result": 1})
    assert got.status_code == 404
    assert api.app.get_job(JSON_ID).state is JobState.STARTED


def test_complete_then_again_reports_unchanged(api: Api) -> None:
    """complete answers changed=true once, then changed=false with the first result."""
    first = api.call("POST", f"/v1/jobs/{CSV}/complete", api.alice, {"result": {"rows": 2}})
    assert first.status_code == 200 and first.json()["changed"] is True
    assert first.json()["job"]["state"] == "succeeded"
    again = api.call("POST", f"/v1/jobs/{CSV}/fail", api.alice, {"error": "late"})
    assert again.json()["changed"] is False
    assert again.json()["job"]["result"] == {"rows": 2}
    kinds = [
        e["kind"] for e in api.call("GET", f"/v1/jobs/{CSV}/events", api.alice).json()["events"]
    ]
    assert kinds == ["succeeded", "ignored"]


def test_progress_extend_and_cancel(api: Api) -> None:
    """progress is logged (and flagged for the model), extend moves the deadline, cancel ends."""
    got = api.call(
        "POST",
        f"/v1/jobs/{CSV}/progress",
        api.alice,
        {"progress": {"percent": 50}, "notifyModel": True},
    )
    assert got.json()["job"]["progress"] == {"percent": 50}
    assert got.json()["job"]["delivery"] == "ready"
    extended = api.call("POST", f"/v1/jobs/{CSV}/extend", api.alice, {"deadline": "2h"})
    assert extended.json()["changed"] is True and extended.json()["job"]["deadlineAt"]
    cancelled = api.call("POST", f"/v1/jobs/{CSV}/cancel", api.alice, {"reason": "no"})
    assert cancelled.json()["job"]["state"] == "cancelled"
    late = api.call("POST", f"/v1/jobs/{CSV}/extend", api.alice, {"deadline": 60})
    assert late.json()["changed"] is False


def test_create_is_idempotent_on_the_job_id(api: Api) -> None:
    """POST /v1/jobs answers 201 for a new job and 200 for the same id again."""
    body = {"toolName": "render", "jobId": "render:1", "args": {"page": 3}, "deadline": "10m"}
    first = api.call("POST", "/v1/jobs", api.alice, body)
    assert first.status_code == 201
    assert first.json()["userId"] == "alice" and first.json()["args"] == {"page": 3}
    assert first.json()["jobId"] == job_id_for("render:1", "alice")
    again = api.call("POST", "/v1/jobs", api.alice, body)
    assert again.status_code == 200 and again.json()["jobId"] == first.json()["jobId"]
    # bob's id of the same key is his own job: nothing tells him alice's exists.
    bobs = api.call("POST", "/v1/jobs", api.bob, body)
    assert bobs.status_code == 201 and bobs.json()["jobId"] == job_id_for("render:1", "bob")
    admins = api.call("POST", "/v1/jobs", api.admin, body)
    assert admins.status_code == 201 and admins.json()["jobId"] == "render:1"
    assert (
        api.call(
            "POST", "/v1/jobs", api.alice, {**body, "jobId": "render:2", "userId": "bob"}
        ).status_code
        == 422
    )


def test_attach_fills_and_refuses_a_conflict(api: Api) -> None:
    """attach on an unjoined job fills its ids; a different call id afterwards is 409."""
    made = api.call("POST", "/v1/jobs", api.alice, {"toolName": "render", "jobId": "r"})
    path = f"/v1/jobs/{made.json()['jobId']}/attach"
    got = api.call("POST", path, api.alice, {"sessionId": "s9", "callId": "c9"})
    assert got.json()["changed"] is True and got.json()["job"]["callId"] == "c9"
    clash = api.call("POST", path, api.alice, {"callId": "other"})
    assert clash.status_code == 409 and clash.json()["error"]["field"] == "call_id"


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        (f"/v1/jobs/{CSV}/fail", {}, 422, "error"),
        (f"/v1/jobs/{CSV}/complete", {"result": 1, "extra": 2}, 422, "extra"),
        (f"/v1/jobs/{CSV}/extend", {"deadline": "soon"}, 422, "deadline"),
        (f"/v1/jobs/{CSV}/extend", {"deadline": -5}, 422, "deadline"),
        ("/v1/jobs", {"args": {}}, 422, "toolName"),
        ("/v1/jobs?x=1", {"toolName": "t", "deadline": "1 fortnight"}, 422, "deadline"),
    ],
)
def test_bad_bodies_are_422_naming_the_field(
    api: Api, path: str, body: Any, status: int, field: str
) -> None:
    """A well-formed body with a wrong field answers 422 naming it, and changes nothing."""
    got = api.call("POST", path, api.alice, body)
    assert (got.status_code, got.json()["error"]["field"]) == (status, field)
    assert api.app.get_job(CSV).state is JobState.STARTED


def test_malformed_bodies_are_4xx(api: Api) -> None:
    """Not JSON 400, wrong content type 415, too deep 400, too large 413."""
    headers = {"authorization": f"Bearer {api.alice}", "content-type": "application/json"}
    path = f"/v1/jobs/{CSV}/complete"
    assert api.client.post(path, content=b"{nope", headers=headers).status_code == 400
    assert (
        api.client.post(path, content=b"[" * 5000 + b"]" * 5000, headers=headers).status_code == 400
    )
    assert (
        api.client.post(path, content=b"x" * (2 * 1024 * 1024), headers=headers).status_code == 413
    )
    text = {**headers, "content-type": "text/plain"}
    assert api.client.post(path, content=b"{}", headers=text).status_code == 415
    assert api.app.get_job(CSV).state is JobState.STARTED


def test_list_filters_and_cursor_pagination(api: Api) -> None:
    """Filters narrow the list; the cursor walks it page by page without repeats."""
    for n in range(5):
        api.call(
            "POST",
            "/v1/jobs",
            api.admin,
            {"toolName": "render", "jobId": f"r{n}", "userId": "carol"},
        )
    seen, cursor = [], None
    while True:
        params = {"tool": "render", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.call("GET", "/v1/jobs", api.admin, params=params).json()
        seen += [j["jobId"] for j in page["jobs"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"r{n}" for n in range(5)] and len(seen) == 5
    assert api.call("GET", "/v1/jobs", api.admin, params={"state": "bogus"}).status_code == 422
    assert api.call("GET", "/v1/jobs", api.admin, params={"cursor": "!!"}).status_code == 422
    assert api.call("GET", "/v1/jobs", api.admin, params={"limit": 0}).status_code == 422


def test_revoked_token_is_401(api: Api) -> None:
    """Once revoked, a token answers 401."""
    info = next(t for t in api.app.store.tokens() if t.user_id == "alice")
    assert api.app.store.revoke_token(info.token_id)
    assert api.call("GET", "/v1/jobs", api.alice).status_code == 401


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/jobs?limit=%C2%B2", {}),  # "²": a digit to str.isdigit, not to int()
        ("/v1/jobs?limit=" + "9" * 30, {}),
        # Header bytes are read as Latin-1: 0xB2 arrives as "²".
        (f"/v1/jobs/{CSV}/events", {"accept": "text/event-stream", "last-event-id": b"\xb2"}),
    ],
)
def test_unicode_and_huge_numbers_are_422_not_500(
    api: Api, path: str, headers: dict[str, str | bytes]
) -> None:
    got = api.call("GET", path, api.admin, headers=headers)
    assert got.status_code == 422
    assert got.json()["error"]["field"]


def test_cancelling_a_job_for_a_tool_outside_python_calls_no_hook(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A job made over POST /v1/jobs and cancelled with a worker running queues no on_cancel
    item and logs nothing; a Python tool's hook is still called, once."""
    hooked: list[str] = []

    @api.app.long_running(key="print:{doc}", on_cancel=lambda job: hooked.append(job.id))
    def print_doc(doc: str) -> str:
        """Prints."""
        return "printing"

    print_doc.invoke({"doc": "a"}, CallIds("exports", "alice", "s-p", "c-p", "i-p"))
    made = api.call("POST", "/v1/jobs", api.alice, {"toolName": "render", "jobId": "render:9"})
    assert made.status_code == 201, made.text
    render_9, print_a = made.json()["jobId"], job_id_for("print:a", "alice")
    worker = api.app.worker(dispatch_interval="20ms")
    thread = threading.Thread(target=asyncio.run, args=(worker.run(handle_signals=False),))
    caplog.set_level(logging.INFO, logger="longcall")
    thread.start()
    try:
        for job_id in (render_9, print_a):
            got = api.call("POST", f"/v1/jobs/{job_id}/cancel", api.alice, {"reason": "no"})
            assert got.status_code == 200 and got.json()["changed"], got.text
        deadline = time.monotonic() + 10
        while not hooked:
            assert time.monotonic() < deadline, "the print hook was not called"
            time.sleep(0.02)
        time.sleep(0.3)  # a dozen dispatcher passes: time enough to retry anything
    finally:
        while worker.stop_event is None and thread.is_alive():
            time.sleep(0.01)
        worker.stop()
        thread.join(10)
    assert hooked == [print_a]
    assert sql_rows(api.app.url, "SELECT job_id, kind FROM lc_outbox") == []
    assert [e.kind for e in api.app.job_events(render_9)] == ["cancelled"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
