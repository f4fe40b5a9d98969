"""Delivering an orphaned job again: ``POST /v1/jobs/{id}/redeliver`` and the job page's
button (the server and the browser are set up in conftest.py; the CLI's command is tested in
tests/test_cli_redeliver.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from longcall import CallIds, Delivery, JobState, job_id_for

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from longcall.store import NewJob
from server.conftest import Served

LOST = job_id_for("export:lost", "alice")


def orphan(served: Served, job_id: str = LOST, user_id: str = "alice") -> None:
    """A finished job of ``user_id`` joined to a call its session never had: the worker's
    agent refuses it and the job is orphaned."""
    ids = CallIds(None, user_id, f"gone-{job_id}", f"call-{job_id}", None)
    new = NewJob(job_id, "export", {}, ids, None)
    served.app.store.create_job(new, holder="test", dispatch_lease=0, dispatch=False)
    # The store's own call: Playwright runs an event loop in this thread.
    served.app.store.finish(job_id, JobState.SUCCEEDED, {"url": "https://example.com/x.csv"})
    wait_for(served, job_id, Delivery.ORPHANED)


def wait_for(served: Served, job_id: str, delivery: Delivery) -> None:
    deadline = time.monotonic() + 15
    while served.app.store.get_job(job_id).delivery is not delivery:
        assert time.monotonic() < deadline, f"job {job_id} never became {delivery}"
        time.sleep(0.02)


def kinds(served: Served, job_id: str) -> list[str]:
    return [e.kind for e in served.app.store.job_events(job_id)]


def test_redeliver_puts_an_orphan_back_and_refuses_anything_else(served: Served) -> None:
    """An orphan goes back to ready (the worker tries it again); a started job is a 409; a
    job that is not the caller's, or does not exist, a 404; a bad app name a 422."""
    orphan(served)
    bad = served.api.post(f"/v1/jobs/{LOST}/redeliver", json={"appName": "x" * 10_000})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "appName", bad.text
    assert served.app.get_job(LOST).delivery is Delivery.ORPHANED
    answer = served.api.post(f"/v1/jobs/{LOST}/redeliver", json={})
    assert answer.status_code == 200, answer.text
    assert answer.json()["changed"] is True
    assert answer.json()["job"]["deliveryAttempts"] == 0
    # Its call is still missing: the worker orphans it again, and the log tells both times.
    wait_for(served, LOST, Delivery.ORPHANED)
    assert kinds(served, LOST).count("delivery_orphaned") == 2
    assert "redelivered" in kinds(served, LOST)

    started = served.api.post("/v1/jobs", json={"jobId": "export:new", "toolName": "export"})
    new_id = started.json()["jobId"]
    refused = served.api.post(f"/v1/jobs/{new_id}/redeliver", json={})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "not_redeliverable"
    assert served.app.get_job(new_id).state is JobState.STARTED

    orphan(served, "bobs-job", user_id="bob")
    assert served.api.post("/v1/jobs/bobs-job/redeliver", json={}).status_code == 404
    assert served.app.get_job("bobs-job").delivery is Delivery.ORPHANED
    assert served.api.post("/v1/jobs/nobody/redeliver", json={}).status_code == 404


def test_the_job_page_delivers_an_orphan_again_with_its_button(page: Any, served: Served) -> None:
    """The button is off for a job whose delivery is fine and on for an orphan; pressing it
    sends the job back to delivery, through the login cookie and its CSRF checks."""
    from playwright.sync_api import expect

    ready = served.api.post("/v1/jobs", json={"jobId": "export:fine", "toolName": "export"})
    page.goto(f"{served.url}/jobs/{ready.json()['jobId']}")
    again = page.locator('form[data-verb="redeliver"]').get_by_role("button", name="Deliver again")
    expect(again).to_be_disabled()

    orphan(served)
    page.goto(f"{served.url}/jobs/{LOST}")
    expect(page.locator('[data-field="delivery"]').first).to_have_text("orphaned")
    expect(again).to_be_enabled()
    again.click()
    expect(page.locator("#outcome")).to_have_text("Done; its delivery is ready.", timeout=5000)
    assert "redelivered" in kinds(served, LOST)
