"""POST /v1/hooks/{source} over a real uvicorn server and a real HTTP client.

Each bad input and attack asserts its status and that nothing was written; each verified
delivery asserts it was committed before the answer.
"""

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


@dataclass
class Service:
    app: longcall.App
    client: httpx.Client
    secret: str

    def post(
        self,
        body: bytes,
        *,
        secret: str | None = None,
        source: str = "batch",
        webhook_id: str | None = None,
        timestamp: int | None = None,
        content_type: str = "application/json",
    ) -> httpx.Response:
        headers = sign(body, secret or self.secret, webhook_id=webhook_id, timestamp=timestamp)
        headers["content-type"] = content_type
        return self.client.post(f"/v1/hooks/{source}", content=body, headers=headers)

    def deliver(self, payload: object, **options: object) -> httpx.Response:
        return self.post(json.dumps(payload).encode(), **options)  # type: ignore[arg-type]

    def nothing_written(self, job_id: str = "export:csv") -> None:
        job = self.app.get_job(job_id)
        assert job.state is JobState.STARTED and job.progress is None
        assert self.app.store.inbox(job_id) == []


@pytest.fixture
def service(db_url: str, live: Any) -> Iterator[Service]:
    """A live server on a free port with source 'batch' and job 'export:csv' started."""
    app = longcall.App(db_url)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    export.invoke({"fmt": "csv"})
    secret = app.store.add_hook_secret("batch", new_secret()).secret
    with live(app) as client:
        yield Service(app, client, secret)
    app.close()


def test_signed_completion_is_applied_and_committed_before_the_answer(service: Service) -> None:
    """A verified completion answers 200 'applied' and the job is already succeeded."""
    got = service.deliver({"jobId": "export:csv", "type": "complete", "result": {"rows": 3}})
    assert got.status_code == 200
    assert got.json() == {"outcome": "applied", "jobId": "export:csv"}
    job = service.app.get_job("export:csv")
    assert job.state is JobState.SUCCEEDED and job.result == {"rows": 3}


def test_repeat_inside_the_window_is_2xx_and_changes_nothing(service: Service) -> None:
    """The same delivery id again is answered 200 'duplicate' and nothing changes."""
    body = json.dumps({"jobId": "export:csv", "type": "progress", "progress": 1}).encode()
    first = service.post(body, webhook_id="msg_1")
    again = service.post(body, webhook_id="msg_1")
    assert (first.status_code, first.json()["outcome"]) == (200, "applied")
    assert (again.status_code, again.json()["outcome"]) == (200, "duplicate")
    assert [e.kind for e in service.app.job_events("export:csv")] == ["progress"]


def test_late_result_and_unknown_job_are_acknowledged(service: Service) -> None:
    """A result for a finished job is 200 'unchanged'; one for an unknown job is 202 'early'."""
    service.app.complete("export:csv", {"rows": 1})
    late = service.deliver({"jobId": "export:csv", "type": "fail", "error": "too late"})
    assert (late.status_code, late.json()["outcome"]) == (200, "unchanged")
    assert service.app.get_job("export:csv").state is JobState.SUCCEEDED
    early = service.deliver({"jobId": "export:json", "type": "complete", "result": 5})
    assert (early.status_code, early.json()["outcome"]) == (202, "early")


def test_sql_like_job_id_is_just_an_id(service: Service) -> None:
    """An id full of SQL is stored as an id; the tables are intact."""
    evil = "x'); DROP TABLE lc_jobs; --"
    got = service.deliver({"jobId": evil, "type": "complete"})
    assert (got.status_code, got.json()) == (202, {"outcome": "early", "jobId": evil})
    assert service.app.get_job("export:csv").state is JobState.STARTED


@pytest.mark.parametrize(
    "mutate",
    [
        "forged",
        "missing-signature",
        "missing-id",
        "missing-timestamp",
        "other-secret",
        "stale",
        "future",
        "float-timestamp",
        "malformed-signature",
    ],
)
def test_bad_signatures_are_401_and_write_nothing(service: Service, mutate: str) -> None:
    """Forged, missing, stale, future and malformed signatures: 401, nothing written."""
    body = json.dumps({"jobId": "export:csv", "type": "complete", "result": 1}).encode()
    now = int(time.time())
    secret = new_secret() if mutate == "other-secret" else service.secret
    headers = sign(body, secret, timestamp={"stale": now - 600, "future": now + 600}.get(mutate))
    headers["content-type"] = "application/json"
    if mutate == "forged":
        headers["webhook-signature"] = "v1,AAAA" + headers["webhook-signature"][7:]
    elif mutate.startswith("missing-"):
        del headers[f"webhook-{mutate.removeprefix('missing-')}"]
    elif mutate == "float-timestamp":
        headers["webhook-timestamp"] += ".0"
    elif mutate == "malformed-signature":
        headers["webhook-signature"] = "garbage"
    got = service.client.post("/v1/hooks/batch", content=body, headers=headers)
    assert got.status_code == 401
    assert got.json()["error"]["code"] == "webhook_unauthorized"
    service.nothing_written()


def test_unknown_source_is_401(service: Service) -> None:
    """A source with no secret configured cannot deliver anything."""
    got = service.deliver({"jobId": "export:csv", "type": "complete"}, source="nobody")
    assert got.status_code == 401
    service.nothing_written()


def test_rotated_secret_old_and_new_verify_until_the_old_is_retired(service: Service) -> None:
    """During a rotation both secrets verify; a retired secret no longer does."""
    old = service.app.store.hook_secrets("batch")[0]
    new = service.app.store.add_hook_secret("batch", new_secret())
    progress = {"jobId": "export:csv", "type": "progress", "progress": 1}
    assert service.deliver(progress, secret=old.secret).status_code == 200
    assert service.deliver(progress, secret=new.secret).status_code == 200
    assert service.app.store.retire_hook_secret("batch", old.secret_id)
    assert service.deliver(progress, secret=old.secret).status_code == 401
    assert service.deliver(progress, secret=new.secret).status_code == 200
    assert len(service.app.job_events("export:csv")) == 3


def test_oversized_body_is_413_without_being_read(service: Service) -> None:
    """A 5 MB body is refused 413 from its Content-Length; nothing written."""
    body = b'{"jobId": "export:csv", "type": "complete", "result": "' + b"x" * 5_000_000 + b'"}'
    got = service.post(body)
    assert got.status_code == 413
    service.nothing_written()


def test_lying_content_length_cannot_smuggle_a_large_body(service: Service) -> None:
    """A chunked body with no length that grows past the limit is cut off at 413."""

    def chunks() -> Iterator[bytes]:
        yield b'{"jobId": "export:csv", "type": "complete", "result": "'
        for _ in range(100):
            yield b"x" * 65536
        yield b'"}'

    headers = sign(b"{}", service.secret)
    headers["content-type"] = "application/json"
    got = service.client.post("/v1/hooks/batch", content=chunks(), headers=headers)
    assert got.status_code == 413
    service.nothing_written()


def test_deep_json_and_invalid_utf8_are_400_after_the_signature(service: Service) -> None:
    """Signed 5,000-deep JSON and signed invalid UTF-8 are 400; nothing written."""
    deep = service.post(b"[" * 5000 + b"]" * 5000)
    assert (deep.status_code, deep.json()["error"]["code"]) == (400, "webhook_bad_request")
    latin = service.post(b'{"jobId": "export:csv", "type": "complete", "result": "\xff"}')
    assert latin.status_code == 400
    service.nothing_written()


def test_wrong_content_type_is_415(service: Service) -> None:
    """A delivery that is not application/json is refused before anything else."""
    got = service.deliver({"jobId": "export:csv", "type": "complete"}, content_type="text/plain")
    assert (got.status_code, got.json()["error"]["field"]) == (415, "content-type")
    service.nothing_written()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"type": "complete"}, "jobId"),
        ({"jobId": "export:csv", "type": "finish"}, "type"),
        ({"jobId": "export:csv", "type": "fail"}, "error"),
        ({"jobId": "", "type": "complete"}, "jobId"),
        ({"jobId": "export:csv", "type": "complete", "extra": 1}, "extra"),
        ([1, 2], None),
    ],
)
def test_wrong_shape_is_422_naming_the_field(
    service: Service, payload: object, field: str | None
) -> None:
    """A signed, well-formed body of the wrong shape is 422 with the field that is wrong."""
    got = service.deliver(payload)
    assert got.status_code == 422
    assert got.json()["error"]["code"] == "invalid_delivery"
    assert got.json()["error"]["field"] == field
    service.nothing_written()


def test_health_and_readiness(service: Service) -> None:
    """/healthz is 200; /readyz is 200 on a migrated store."""
    assert service.client.get("/healthz").json() == {"status": "ok"}
    assert service.client.get("/readyz").json() == {"status": "ready"}


@pytest.mark.parametrize("text", ["\\u0000", "\\ud800"])
def test_json_no_store_can_keep_is_400(service: Service, text: str) -> None:
    """A NUL character or a lone surrogate in a signed body is 400 on both backends, not 503."""
    body = ('{"jobId": "export:csv", "type": "complete", "result": "a' + text + 'b"}').encode()
    got = service.post(body)
    assert (got.status_code, got.json()["error"]["code"]) == (400, "webhook_bad_request")
    service.nothing_written()
