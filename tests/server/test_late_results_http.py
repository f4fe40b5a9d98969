"""Late results over real HTTP: a signed webhook and POST /v1/jobs/{id}/complete after the
job's deadline are answered 2xx, change nothing, and leave the job expired."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import longcall
from longcall import JobState

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.webhooks import new_secret, sign

DEADLINE = 0.3  # seconds, on the real clocks: the database's on PostgreSQL


@dataclass
class Late:
    app: longcall.App
    client: httpx.Client
    secret: str
    token: str
    job_id: str


@pytest.fixture
def late(db_url: str, live: Any) -> Iterator[Late]:
    """A live server, a job with a 0.3 s deadline, and that deadline passed (no sweeper)."""
    with longcall.App(db_url) as app:

        @app.long_running(key="export:{fmt}", deadline=DEADLINE)
        def export(fmt: str) -> str:
            """Exports."""
            return "started"

        export.invoke({"fmt": "csv"})
        secret = app.store.add_hook_secret("batch", new_secret()).secret
        token = app.store.create_token(user_id=None, admin=True)[1]
        time.sleep(DEADLINE + 0.2)
        with live(app) as client:
            yield Late(app, client, secret, token, "export:csv")


def assert_expired_and_logged_late(late: Late) -> None:
    job = late.app.get_job(late.job_id)
    assert job.state is JobState.EXPIRED and job.result is not None
    assert job.result["deadlineAt"] == job.deadline_at
    events = late.app.job_events(late.job_id)
    assert [e.kind for e in events] == ["expired", "ignored"]
    assert events[-1].data["late"] is True and events[-1].data["result"] == {"rows": 3}


def test_late_signed_webhook_is_answered_2xx_and_changes_nothing(late: Late) -> None:
    """A verified completion past the deadline: 200 'unchanged'; its repeat is a duplicate."""
    body = json.dumps({"jobId": late.job_id, "type": "complete", "result": {"rows": 3}}).encode()
    headers = sign(body, late.secret, webhook_id="late-1")
    headers["content-type"] = "application/json"
    got = late.client.post("/v1/hooks/batch", content=body, headers=headers)
    assert got.status_code == 200
    assert got.json() == {"outcome": "unchanged", "jobId": late.job_id}
    again = late.client.post("/v1/hooks/batch", content=body, headers=headers)
    assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
    (entry,) = late.app.store.inbox(late.job_id)
    assert entry["outcome"] == "unchanged"
    assert_expired_and_logged_late(late)
    assert late.app.sweeper().sweep() == []


def test_late_api_complete_answers_like_a_finished_job(late: Late) -> None:
    """POST complete past the deadline: 200, changed false, the job expired."""
    got = late.client.post(
        f"/v1/jobs/{late.job_id}/complete",
        json={"result": {"rows": 3}},
        headers={"authorization": f"Bearer {late.token}"},
    )
    assert got.status_code == 200
    assert got.json()["changed"] is False and got.json()["job"]["state"] == "expired"
    assert_expired_and_logged_late(late)
