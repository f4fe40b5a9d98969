"""The smaller points: Allow on 405, headers on every answer, an empty cursor, deadlines that
are not numbers of seconds, empty cron expressions, the spec's bounds, UTF-8 webhook ids."""

from __future__ import annotations

import datetime
import json

import pytest

from longcall.core.ids import JOB_ID_MAX, MAX_DEADLINE_SECONDS
from longcall.core.jobs import job_id_for
from longcall.webhooks import new_secret
from server.conftest import Api

ALICE_JOB = job_id_for("export:csv", "alice")  # the api fixture's job of alice's


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/jobs", "GET, HEAD, POST"),
        # A job id may hold "/": GET reads the job "export:csv/complete" here.
        ("DELETE", "/v1/jobs/export:csv/complete", "GET, HEAD, POST"),
        ("GET", "/v1/hooks/batch", "POST"),
        ("POST", "/v1/cron/cron-1", "DELETE, GET, HEAD, PATCH"),
        ("PATCH", "/healthz", "GET, HEAD"),
    ],
)
def test_a_405_says_which_methods_are_allowed(
    api: Api, method: str, path: str, allowed: str
) -> None:
    """405 lists, in Allow, the methods of every route at that path."""
    got = api.call(method, path, api.alice)
    assert got.status_code == 405
    assert got.headers["allow"] == allowed
    assert got.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("method", "path", "token"),
    [
        ("GET", "/v1/jobs", True),
        ("GET", "/v1/jobs/nope", True),
        ("GET", "/v1/jobs", False),
        ("GET", "/healthz", False),
        ("GET", "/openapi.json", False),
        ("PUT", "/v1/jobs", True),
        ("GET", "/nothing-here", False),
    ],
)
def test_every_answer_is_neither_sniffed_nor_cached(
    api: Api, method: str, path: str, token: bool
) -> None:
    """nosniff and no-store on answers of every kind: 200, 401, 404, 405."""
    got = api.call(method, path, api.alice if token else None)
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(("path", "key"), [("/v1/jobs", "jobs"), ("/v1/runs", "runs")])
def test_an_empty_cursor_is_the_first_page(api: Api, path: str, key: str) -> None:
    """``cursor=`` (empty) answers the first page, as no cursor does."""
    first = api.call("GET", path, api.alice)
    empty = api.call("GET", path + "?cursor=", api.alice)
    assert first.status_code == empty.status_code == 200
    assert empty.json()[key] == first.json()[key]


def test_an_empty_cron_cursor_is_the_first_page(api: Api) -> None:
    """The schedules listing takes ``cursor=`` as the first page too."""
    got = api.call("GET", "/v1/cron?cursor=", api.alice)
    assert got.status_code == 200 and got.json()["crons"] == []


@pytest.mark.parametrize(
    "deadline",
    [False, True, MAX_DEADLINE_SECONDS + 1, "3651d", "87601h", -1, "soon", None],
    ids=["false", "true", "over10y-number", "over10y-days", "over10y-hours", "neg", "word", "-"],
)
def test_a_deadline_that_is_no_duration_is_422(api: Api, deadline: object) -> None:
    """false/true are not 0 and 1 seconds; 10 years is the most: 422 naming deadline."""
    if deadline is None:  # the control: a sound deadline is accepted
        got = api.call("POST", "/v1/jobs", api.alice, {"toolName": "t", "deadline": "2d"})
        assert got.status_code == 201 and got.json()["deadlineAt"] is not None
        return
    got = api.call("POST", "/v1/jobs", api.alice, {"toolName": "t", "deadline": deadline})
    assert got.status_code == 422, got.text
    assert got.json()["error"]["field"].startswith("deadline")
    assert [j["toolName"] for j in api.call("GET", "/v1/jobs", api.alice).json()["jobs"]] == [
        "export"
    ]
    extended = api.call("POST", f"/v1/jobs/{ALICE_JOB}/extend", api.alice, {"deadline": deadline})
    assert extended.status_code == 422, extended.text
    assert api.app.get_job(ALICE_JOB).deadline_at is None


def test_an_empty_cron_expression_is_refused_as_the_spec_says(api: Api) -> None:
    """cronExpression "" is 422, and the spec says so (minLength 1)."""
    body = {
        "name": "n",
        "workflowId": "w",
        "cronExpression": "",
        "concurrencyPolicy": "skip",
    }
    got = api.call("POST", "/v1/cron", api.admin, body)
    assert got.status_code == 422 and got.json()["error"]["field"] == "cronExpression"
    spec = api.call("GET", "/openapi.json", None).json()
    create = spec["paths"]["/v1/cron"]["post"]["requestBody"]["content"]["application/json"]
    schema = create["schema"]
    if "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    assert schema["properties"]["cronExpression"]["minLength"] == 1


def test_the_spec_publishes_the_bounds(api: Api) -> None:
    """Path, query, header and body ids carry maxLength and a pattern refusing NUL."""
    spec = api.call("GET", "/openapi.json", None).json()
    job = spec["paths"]["/v1/jobs/{jobId}"]["get"]["parameters"][0]["schema"]
    assert job["maxLength"] == JOB_ID_MAX and "\\u0000" in job["pattern"]
    listing = {p["name"]: p["schema"] for p in spec["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert listing["session"]["maxLength"] == 200
    assert listing["q"]["maxLength"] == 200
    create = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    text = json.dumps(create["schema"]) + json.dumps(spec["components"]["schemas"])
    assert '"maxLength": 200' in text
    hook = {p["name"]: p for p in spec["paths"]["/v1/hooks/{source}"]["post"]["parameters"]}
    assert hook["webhook-id"]["schema"]["maxLength"] == 256


def test_a_non_ascii_webhook_id_verifies(api: Api) -> None:
    """A delivery signed by standardwebhooks with a UTF-8 webhook-id is accepted, once."""
    standardwebhooks = pytest.importorskip("standardwebhooks")
    secret = new_secret()
    api.app.store.add_hook_secret("batch", secret)
    body = json.dumps({"jobId": ALICE_JOB, "type": "complete", "result": {"rows": 3}})
    webhook_id = "msg_Übermorgen_東京_😀"
    now = datetime.datetime.now(datetime.UTC)
    signature = standardwebhooks.Webhook(secret).sign(webhook_id, now, body)
    headers = {
        "content-type": "application/json",
        "webhook-id": webhook_id.encode(),
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    got = api.client.post("/v1/hooks/batch", content=body.encode(), headers=headers)
    assert got.status_code == 200, got.text
    assert got.json()["outcome"] == "applied"
    again = api.client.post("/v1/hooks/batch", content=body.encode(), headers=headers)
    assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
    assert api.app.get_job(ALICE_JOB).result == {"rows": 3}


def test_a_webhook_id_that_is_not_utf8_is_400(api: Api) -> None:
    """Header bytes that are not UTF-8 cannot be what was signed: 400, nothing stored."""
    api.app.store.add_hook_secret("batch", new_secret())
    headers = {
        "content-type": "application/json",
        "webhook-id": b"msg_\xff\xfe",
        "webhook-timestamp": "1",
        "webhook-signature": "v1,AAAA",
    }
    got = api.client.post("/v1/hooks/batch", content=b"{}", headers=headers)
    assert got.status_code == 400 and got.json()["error"]["field"] == "webhook-id"
