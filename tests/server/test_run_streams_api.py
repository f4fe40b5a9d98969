"""GET /v1/runs/{runId}/streams/{streamKey} over a real server, on SQLite and PostgreSQL: a
stream written by a worker process read live as server-sent events, a reconnect with
Last-Event-ID that loses and repeats nothing, the end event, ownership, and refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longcall import RunStatus, TaskContext
from workflows.stream_procs import build_app
from workflows.test_timers import kill, wait_for

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Api

SCRIPT = Path(__file__).resolve().parents[1] / "workflows" / "stream_procs.py"
SSE = {"accept": "text/event-stream"}


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    app = build_app(db_url)
    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Api(app, client, alice, bob, admin)
    finally:
        app.close()


def events(api: Api, path: str, token: str, *, stop_after: int | None = None, **options: Any):
    """The stream's events as (event, id, data) until it ends, or until ``stop_after`` items
    (then the connection is dropped, as a client's would be)."""
    headers = {**SSE, "authorization": f"Bearer {token}", **options.pop("headers", {})}
    found: list[tuple[str, str | None, Any]] = []
    with api.client.stream("GET", path, headers=headers, timeout=60, **options) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/event-stream")
        event, event_id = "message", None
        for line in answer.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                found.append((event, event_id, json.loads(line[6:])))
                if event == "end" or (stop_after is not None and len(found) == stop_after):
                    return found
                event, event_id = "message", None
    raise AssertionError(f"the stream closed without an end event: {found}")


def spawn_worker(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    with (tmp_path / "worker.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), "--url", url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def test_a_reconnect_mid_stream_resumes_without_loss_or_repeats(
    api: Api, db_url: str, tmp_path: Path
) -> None:
    """A worker process streams 30 tokens; the client reads 5 live, drops the connection,
    reconnects with Last-Event-ID and gets the other 25, then the end."""
    run = api.app.submit_run("talker", {"count": 30, "gap": 0.03}, user_id="alice")
    path = f"/v1/runs/{run.run_id}/streams/tokens"
    worker = spawn_worker(db_url, tmp_path)
    try:
        first = events(api, path, api.alice, stop_after=5)
        assert api.app.get_run(run.run_id).run.status is RunStatus.RUNNING  # read live
        rest = events(api, path, api.alice, headers={"last-event-id": first[-1][1]})
        wait_for(api.app, run.run_id, RunStatus.COMPLETED, seconds=30)
    finally:
        kill(worker)
    items = first + rest[:-1]
    assert [(e, i) for e, i, _ in items] == [("item", str(n)) for n in range(1, 31)]
    assert [d["value"] for _, _, d in items] == [f"w{n} " for n in range(30)]
    assert all(d["seq"] == int(i) for _, i, d in items if i is not None)
    assert rest[-1] == ("end", None, {"runId": run.run_id, "key": "tokens", "lastSeq": 30})


def test_after_the_run_the_stream_is_read_from_the_start_or_after(api: Api) -> None:
    run = api.app.submit_run("talker", {"count": 4, "gap": 0}, user_id="alice")
    assert api.app.continue_run(run.run_id).status is RunStatus.COMPLETED
    path = f"/v1/runs/{run.run_id}/streams/tokens"
    whole = events(api, path, api.admin)
    assert [d.get("value") for _, _, d in whole] == ["w0 ", "w1 ", "w2 ", "w3 ", None]
    assert whole[-1][0] == "end"
    after = events(api, path, api.alice, params={"after": 3})
    assert [(e, i) for e, i, _ in after] == [("item", "4"), ("end", None)]
    status = events(api, f"/v1/runs/{run.run_id}/streams/status", api.alice)
    assert [d.get("value") for _, _, d in status] == ["started", "done", None]
    page = api.call("GET", path, api.alice, params={"after": 2})  # no Accept: JSON
    assert page.status_code == 200, page.text
    assert page.json() == {
        "items": [
            {"seq": 3, "value": "w2 ", "attempt": whole[2][2]["attempt"]},
            {"seq": 4, "value": "w3 ", "attempt": whole[3][2]["attempt"]},
        ],
        "ended": True,
    }


def test_a_cancelled_run_ends_its_streams(api: Api) -> None:
    run = api.app.submit_run("talker", {"count": 1, "gap": 0}, user_id="alice")  # queued
    path = f"/v1/runs/{run.run_id}/streams/tokens"
    assert api.call("DELETE", f"/v1/runs/{run.run_id}", api.alice).status_code < 300
    assert events(api, path, api.alice) == [
        ("end", None, {"runId": run.run_id, "key": "tokens", "lastSeq": 0})
    ]


def test_refusals_say_what_is_wrong(api: Api) -> None:
    run = api.app.submit_run("talker", {"count": 1, "gap": 0}, user_id="alice")
    path = f"/v1/runs/{run.run_id}/streams/tokens"
    cases = [
        (f"/v1/runs/{run.run_id}/streams/tokens", api.bob, {}, 404, "run_not_found"),
        ("/v1/runs/no-such-run/streams/tokens", api.admin, {}, 404, "run_not_found"),
        (path, None, {}, 401, None),
        (path, api.alice, {"headers": {"last-event-id": "seven"}}, 422, "invalid_query"),
        (path, api.alice, {"params": {"after": "-1"}}, 422, "invalid_query"),
        (f"/v1/runs/{run.run_id}/streams/{'k' * 201}", api.alice, {}, 422, "invalid_path"),
    ]
    for where, token, options, status, code in cases:
        headers = {**SSE, **options.pop("headers", {})}
        answer = api.call("GET", where, token, headers=headers, **options)
        assert answer.status_code == status, (where, options, answer.text)
        if code is not None:
            body = answer.json()["error"]
            assert body["code"] == code and body["message"], body
    assert api.app.get_run(run.run_id).run.status is RunStatus.QUEUED  # nothing changed


def test_a_failed_run_ends_its_streams(api: Api) -> None:
    @api.app.workflow("breaks")
    def breaks(ctx: TaskContext) -> None:
        ctx.stream("tokens", "half")
        raise ValueError("boom")

    run = api.app.submit_run("breaks", user_id="alice")
    assert api.app.continue_run(run.run_id).status is RunStatus.FAILED
    got = events(api, f"/v1/runs/{run.run_id}/streams/tokens", api.alice)
    assert [(e, i, d.get("value")) for e, i, d in got] == [
        ("item", "1", "half"),
        ("end", None, None),
    ]
