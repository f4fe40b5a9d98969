"""Oversized and NUL ids, wherever a request can carry one, are refused at once.

Every path parameter, query parameter, id header and body field that takes an id is tried
with an id too large for any index (1,000 characters of 4 bytes each) and with a NUL: the
answer is 400 (a NUL) or 422 (too long), in the error shape, well inside a second, on SQLite
and on PostgreSQL alike (PostgreSQL used to retry the index error for a minute, then 503).
Then 50 such requests at once must not slow another user's requests.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from longcall.core.jobs import job_id_for
from longcall.webhooks import new_secret, sign
from server.conftest import Api

ALICE_JOB = job_id_for("export:csv", "alice")  # the api fixture's job of alice's

HUGE = "\U0001f600" * 1000  # 4,000 bytes: past what a PostgreSQL index keeps
NUL = "a\x00b"


@dataclass(frozen=True)
class Spot:
    """Where an id goes: ``path`` has ``{id}`` for a path id; ``query``, ``header`` or
    ``body`` name the field that carries it instead."""

    method: str
    path: str
    query: str | None = None
    header: str | None = None
    body: dict[str, Any] | None = None  # {"field": None} marks where the id goes
    free_text: bool = False  # any length the body limit allows; only a NUL is refused

    def request(self, api: Api, token: str, value: str) -> httpx.Response:
        path = self.path.replace("{id}", quote(value, safe=""))
        params = {self.query: value} if self.query else None
        headers = {self.header: value} if self.header else {}
        body = None
        if self.body is not None:
            body = {k: (value if v is None else v) for k, v in self.body.items()}
        elif self.method in ("POST", "PATCH"):
            body = {}
        return api.call(self.method, path, token, body, params=params, headers=headers)

    def __str__(self) -> str:
        where = self.query or self.header or (self.body and "body") or "path"
        field = next((k for k, v in (self.body or {}).items() if v is None), "")
        return f"{self.method} {self.path} {where} {field}".strip()


PATHS = [
    ("GET", "/v1/jobs/{id}"),
    ("GET", "/v1/jobs/{id}/events"),
    *(("POST", f"/v1/jobs/{{id}}/{verb}") for verb in ("complete", "fail", "cancel")),
    *(("POST", f"/v1/jobs/{{id}}/{verb}") for verb in ("progress", "attach", "extend")),
    ("GET", "/v1/runs/{id}"),
    ("DELETE", "/v1/runs/{id}"),
    ("GET", "/v1/runs/{id}/events"),
    ("POST", "/v1/runs/{id}/answers"),
    ("POST", "/v1/runs/{id}/resume"),
    ("GET", "/v1/cron/{id}"),
    ("PATCH", "/v1/cron/{id}"),
    ("DELETE", "/v1/cron/{id}"),
    ("POST", "/v1/cron/{id}/trigger"),
    ("GET", "/v1/sessions/{id}/transcript"),
    ("POST", "/v1/hooks/{id}"),
    ("GET", "/jobs/{id}"),
    ("GET", "/runs/{id}"),
    ("GET", "/schedules/{id}"),
]
QUERIES = [
    ("/v1/jobs", ("tool", "session", "user", "cursor", "q", "state")),
    ("/v1/events", ("tool", "session", "cursor")),
    ("/v1/runs", ("workflow", "user", "cursor", "status")),
    ("/v1/cron", ("workflow", "user", "cursor")),
    ("/", ("before", "q")),
    ("/runs", ("before",)),
    ("/schedules", ("after",)),
]
CREATE_JOB = {"toolName": "export", "jobId": "j-1", "sessionId": "s-1", "callId": "c-1"}
BODIES = [
    *(("/v1/jobs", {**CREATE_JOB, field: None}) for field in CREATE_JOB),
    *(("/v1/jobs", {**CREATE_JOB, field: None}) for field in ("appName", "invocationId")),
    ("/v1/jobs", {**CREATE_JOB, "userId": None}),
    (f"/v1/jobs/{ALICE_JOB}/attach", {"sessionId": None}),
    (f"/v1/jobs/{ALICE_JOB}/attach", {"callId": None}),
    ("/v1/runs", {"workflowId": None}),
    ("/v1/runs", {"workflowId": "greet", "userId": None}),
    *(
        ("/v1/cron", {**CRON, field: None})
        for CRON in [
            {
                "name": "n",
                "workflowId": "greet",
                "cronExpression": "0 2 * * *",
                "concurrencyPolicy": "skip",
            }
        ]
        for field in ("name", "workflowId", "cronExpression", "timezone", "userId")
    ),
]
SPOTS = [
    *(Spot(m, p) for m, p in PATHS),
    *(Spot("GET", p, query=q) for p, names in QUERIES for q in names),
    *(Spot("POST", p, body=b) for p, b in BODIES),
    Spot("POST", f"/v1/jobs/{ALICE_JOB}/fail", body={"error": None}, free_text=True),
    Spot("POST", f"/v1/jobs/{ALICE_JOB}/cancel", body={"reason": None}, free_text=True),
    Spot("POST", "/v1/runs", header="idempotency-key", body={"workflowId": "greet"}),
    Spot("GET", "/v1/events", header="last-event-id"),
]
# HTTP itself refuses a NUL in a header (the client library will not send one), and a header
# is latin-1 at most: those get an oversized ASCII value only.
HEADER_HUGE = "x" * 10_000


def bad(spot: Spot, kind: str) -> str:
    if spot.header:
        return HEADER_HUGE
    return NUL if kind == "nul" else HUGE


# A NUL in a header has its own test (test_a_nul_in_a_header_is_400): no HTTP client sends
# one. Free text has no length of its own: the body's size bounds it.
CASES = [
    pytest.param(spot, kind, id=f"{kind}-{spot}")
    for spot in SPOTS
    for kind in ("oversize", "nul")
    if not (spot.header and kind == "nul") and not (spot.free_text and kind == "oversize")
]


@pytest.mark.parametrize(("spot", "kind"), CASES)
def test_a_bad_id_is_refused_at_once(api: Api, spot: Spot, kind: str) -> None:
    """Every place an id goes: 400 for a NUL, 422 for one too long, in well under a second."""
    started = time.monotonic()
    got = spot.request(api, api.alice, bad(spot, kind))
    took = time.monotonic() - started
    assert took < 1.0, took
    if spot.query == "q" and not spot.path.startswith("/v1/"):
        # The dashboard says what is wrong with a search on the page itself.
        assert got.status_code == 400 and "search" in got.text, got.text[:500]
        return
    expected = 400 if kind == "nul" else 422
    assert got.status_code == expected, got.text[:500]
    error = got.json()["error"]
    assert error["code"] and error["message"]


@pytest.mark.parametrize(
    ("path", "header"),
    [
        ("/v1/hooks/batch", "webhook-id"),
        ("/v1/runs", "idempotency-key"),
        ("/v1/events", "last-event-id"),
    ],
)
def test_a_nul_in_a_header_is_400(api: Api, path: str, header: str) -> None:
    """HTTP clients will not send a NUL in a header; sent raw, the server's HTTP parser
    refuses it with 400 before the app (and so the store) sees anything."""
    url = api.client.base_url
    with socket.create_connection((url.host, url.port), timeout=5) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {api.alice}\r\n"
            f"content-type: application/json\r\ncontent-length: 2\r\n".encode()
            + header.encode()
            + b": a\x00b\r\n\r\n{}"
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]


def signed_delivery(api: Api, webhook_id: str) -> dict[str, str]:
    body = json.dumps({"jobId": ALICE_JOB, "type": "complete", "result": 1}).encode()
    headers = sign(body, api.app.store.hook_secrets("batch")[0].secret, webhook_id=webhook_id)
    return {**headers, "content-type": "application/json"}


def test_an_oversize_webhook_id_is_400_before_anything_is_stored(api: Api) -> None:
    """A signed delivery whose webhook-id is too long: 400 at once, the job left as it was."""
    api.app.store.add_hook_secret("batch", new_secret())
    body = json.dumps({"jobId": ALICE_JOB, "type": "complete", "result": 1}).encode()
    headers = signed_delivery(api, "m" * 3000)
    started = time.monotonic()
    got = api.client.post("/v1/hooks/batch", content=body, headers=headers)
    assert time.monotonic() - started < 1.0
    assert got.status_code == 400, got.text
    assert got.json()["error"]["field"] == "webhook-id"
    assert api.app.get_job(ALICE_JOB).state.value == "started"


def test_flooding_bad_ids_leaves_other_users_served(api: Api) -> None:
    """50 bad-id requests at once from bob: alice's reads and writes still answer quickly."""
    floods = [s for s in SPOTS if not s.header and not s.free_text]
    base = str(api.client.base_url)
    flood_statuses: list[int] = []
    flooding = threading.Event()
    done = threading.Event()

    async def flood() -> None:
        # One event loop, 50 connections: the requests are in flight together, and the test
        # process (which also runs the server) is not busy switching 50 threads.
        # No keep-alive between waves: on a loaded machine a wave can take longer than the
        # server's keep-alive (5 s), and a request sent on a connection the server is closing
        # just then fails with ReadError, which says nothing about bad ids.
        limits = httpx.Limits(max_connections=50, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
            headers = {"authorization": f"Bearer {api.bob}"}

            async def one(i: int) -> int:
                spot, kind = floods[i % len(floods)], ("oversize", "nul")[i % 2]
                value = bad(spot, kind)
                path = spot.path.replace("{id}", quote(value, safe=""))
                body = None
                if spot.body is not None:
                    body = {k: (value if v is None else v) for k, v in spot.body.items()}
                elif spot.method in ("POST", "PATCH"):
                    body = {}
                params = {spot.query: value} if spot.query else None
                got = await client.request(
                    spot.method, path, headers=headers, json=body, params=params
                )
                return got.status_code

            for _ in range(3):  # three waves of 50
                flooding.set()
                flood_statuses.extend(await asyncio.gather(*(one(i) for i in range(50))))

    alice_times: list[float] = []
    quiet_times: list[float] = []

    def alice(times: list[float], prefix: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            headers = {"authorization": f"Bearer {api.alice}"}
            flooding.wait(10)
            n = 0
            while not done.is_set() or n < 20:
                started = time.monotonic()
                if n % 2:
                    got = client.get(f"/v1/jobs/{ALICE_JOB}", headers=headers)
                    assert got.status_code == 200, got.text
                else:
                    body = {"toolName": "export", "jobId": f"{prefix}-{n}"}
                    got = client.post("/v1/jobs", json=body, headers=headers)
                    assert got.status_code == 201, got.text
                times.append(time.monotonic() - started)
                n += 1

    flooding.set()
    done.set()
    alice(quiet_times, "quiet")  # the same requests with no flood, to compare
    flooding.clear()
    done.clear()
    watcher = threading.Thread(target=alice, args=(alice_times, "alice"))
    watcher.start()
    flood_started = time.monotonic()
    asyncio.run(flood())
    flood_took = time.monotonic() - flood_started
    done.set()
    watcher.join(30)
    assert len(flood_statuses) == 150
    # bob's writes past his share are 429, and alice's job is not his (404); every other
    # answer refuses the id.
    assert set(flood_statuses) <= {400, 404, 422, 429}, sorted(set(flood_statuses))
    worst = max(alice_times)
    print(
        f"\nbad-id flood: 150 requests in {flood_took * 1000:.0f} ms; {len(alice_times)} of "
        f"alice's requests, median {statistics.median(alice_times) * 1000:.1f} ms, "
        f"max {worst * 1000:.1f} ms (without the flood: median "
        f"{statistics.median(quiet_times) * 1000:.1f} ms, max {max(quiet_times) * 1000:.1f} ms); "
        f"flood answers {sorted(set(flood_statuses))}"
    )
    # The goal is 100 ms; 1 s is the safety net on a shared, loaded test machine.
    assert worst < 1.0, worst
