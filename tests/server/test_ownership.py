"""A session is (user, session id): no user reads or joins another's, over a real server.

Issue 21, items 1 and 4: Bob creating a job with Ana's session id gets a job of his own in a
session of his own, and never reads Ana's transcript, job events, runs or event streams;
``POST /v1/jobs`` answers the same whether or not another user's job id or (session, call)
exists.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import longcall
from longcall import CallIds, Message, job_id_for
from longcall.store.base import NewJob

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from server.conftest import Served, serving
from server.test_events import Stream

ANA_SESSION = "session-ana-1"
WAIT = 10.0  # seconds; the worker polls every 0.1 s


@dataclass
class Users:
    served: Served
    ana: str
    bob: str
    admin: str
    ana_job: str  # the job Ana's agent started in her session
    ana_call: str

    def call(self, method: str, path: str, token: str, body: Any = None) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"}
        return httpx.request(method, self.served.url + path, headers=headers, json=body, timeout=10)

    def transcript(self, token: str, session: str = ANA_SESSION, query: str = "") -> httpx.Response:
        return self.call("GET", f"/v1/sessions/{session}/transcript{query}", token)


@pytest.fixture
def users(db_url: str) -> Iterator[Users]:
    """The dashboard's server (scripted agent, worker loops); Ana asked for an export in her
    session, and Ana, Bob and an admin have tokens."""
    with serving(db_url, worker=True) as served:
        app = served.app
        events = asyncio.run(_ask(served.agent, "ana", ANA_SESSION, "export please"))
        call_id = next(c.id for e in events for c in e.function_calls)
        job = app.get_job(job_id_for("export:csv", "ana"))
        assert job.call_id == call_id and job.session_id == ANA_SESSION
        ana, bob = (app.store.create_token(user_id=u)[1] for u in ("ana", "bob"))
        admin = app.store.create_token(user_id=None, admin=True)[1]
        yield Users(served, ana, bob, admin, job.job_id, call_id)


async def _ask(
    agent: longcall.ScriptedAgent, user: str, session: str, text: str
) -> list[longcall.AgentEvent]:
    return [e async for e in agent.run(user_id=user, session_id=session, message=Message(text))]


def texts(transcript: httpx.Response) -> list[str]:
    return [e["text"] for e in transcript.json()["events"] if e["text"]]


def test_another_users_session_stays_unreadable_after_joining_its_id(users: Users) -> None:
    """Bob gets 404 for Ana's session; creating a job with its id gives him his own job and
    his own (empty) session, never Ana's events (the leak of issue 21 item 1)."""
    mine = users.transcript(users.ana)
    assert mine.status_code == 200 and mine.json()["userId"] == "ana"
    ana_events = mine.json()["events"]
    assert len(ana_events) == 4 and "export please" in texts(mine)

    refused = users.transcript(users.bob)
    nobodys = users.transcript(users.bob, "no-such-session")
    assert refused.status_code == nobodys.status_code == 404
    assert refused.json()["error"]["code"] == nobodys.json()["error"]["code"]
    assert refused.json()["error"]["message"] == f"no session {ANA_SESSION!r}"

    body = {"toolName": "export", "sessionId": ANA_SESSION, "callId": users.ana_call}
    created = users.call("POST", "/v1/jobs", users.bob, body)
    assert created.status_code == 201, created.text
    bobs = created.json()
    assert bobs["userId"] == "bob" and bobs["jobId"] != users.ana_job

    after = users.transcript(users.bob)
    assert after.status_code == 200
    assert after.json()["userId"] == "bob" and after.json()["events"] == []
    assert users.transcript(users.ana).json()["events"] == ana_events


def test_admin_reads_either_users_session_with_user(users: Users) -> None:
    """An admin names whose session to read with ?user=; a user's ?user= changes nothing."""
    body = {"toolName": "export", "sessionId": ANA_SESSION, "callId": users.ana_call}
    assert users.call("POST", "/v1/jobs", users.bob, body).status_code == 201
    as_ana = users.transcript(users.admin, query="?user=ana")
    assert as_ana.status_code == 200 and as_ana.json()["userId"] == "ana"
    assert len(as_ana.json()["events"]) == 4
    as_bob = users.transcript(users.admin, query="?user=bob")
    assert as_bob.json()["userId"] == "bob" and as_bob.json()["events"] == []
    assert users.transcript(users.admin, query="?user=carol").status_code == 404
    bob_asks_for_ana = users.transcript(users.bob, query="?user=ana")
    assert bob_asks_for_ana.json()["userId"] == "bob" and bob_asks_for_ana.json()["events"] == []


def test_bobs_result_never_reaches_anas_session(users: Users) -> None:
    """Bob's job on Ana's (session, call) is delivered to his own session: the scripted agent
    holds no such call for him, so it is orphaned, and Ana's conversation is untouched."""
    body = {"toolName": "export", "sessionId": ANA_SESSION, "callId": users.ana_call}
    bobs = users.call("POST", "/v1/jobs", users.bob, body).json()
    done = users.call("POST", f"/v1/jobs/{bobs['jobId']}/complete", users.bob, {"result": 666})
    assert done.status_code == 200 and done.json()["changed"] is True
    deadline = time.monotonic() + WAIT
    while users.served.app.get_job(bobs["jobId"]).delivery.value != "orphaned":
        assert time.monotonic() < deadline, "Bob's job was never given up as orphaned"
        time.sleep(0.05)
    events = users.transcript(users.ana).json()["events"]
    answers = [r["response"] for e in events for r in e["functionResponses"]]
    assert answers, "Ana's transcript holds no function response"
    # Ana's call has had only its pending answer; nothing of Bob's job is in her session.
    assert all(isinstance(a, dict) and a.get("status") == "pending" for a in answers), answers
    assert bobs["jobId"] not in str(events)
    # Ana's own result still reaches her.
    users.call("POST", f"/v1/jobs/{users.ana_job}/complete", users.ana, {"result": {"rows": 7}})
    while "rows 7" not in " ".join(texts(users.transcript(users.ana))):
        assert time.monotonic() < deadline + WAIT, "Ana's result was never delivered"
        time.sleep(0.05)


def test_job_reads_events_and_writes_are_404_for_another_user(users: Users) -> None:
    """Ana's job, its event log (JSON and SSE) and its actions answer Bob 404, as a job that
    does not exist does."""
    for path in (
        f"/v1/jobs/{users.ana_job}",
        f"/v1/jobs/{users.ana_job}/events",
    ):
        assert users.call("GET", path, users.bob).status_code == 404
        assert users.call("GET", path, users.ana).status_code == 200
    sse = httpx.get(
        f"{users.served.url}/v1/jobs/{users.ana_job}/events",
        headers={"authorization": f"Bearer {users.bob}", "accept": "text/event-stream"},
        timeout=10,
    )
    assert sse.status_code == 404
    for action, body in (("complete", {"result": 1}), ("progress", {"progress": 1})):
        got = users.call("POST", f"/v1/jobs/{users.ana_job}/{action}", users.bob, body)
        assert got.status_code == 404
    assert users.served.app.get_job(users.ana_job).state.value == "started"
    listed = users.call("GET", f"/v1/jobs?session={ANA_SESSION}", users.bob).json()
    assert listed["jobs"] == []


def test_event_stream_of_a_session_id_shows_only_the_callers_jobs(users: Users) -> None:
    """Bob's /v1/events?session=<Ana's id> stream carries his job's changes, never Ana's."""
    body = {"toolName": "export", "sessionId": ANA_SESSION, "callId": users.ana_call}
    bobs = users.call("POST", "/v1/jobs", users.bob, body).json()["jobId"]
    with httpx.Client(base_url=users.served.url) as client:
        stream = Stream(client, f"/v1/events?session={ANA_SESSION}", users.bob)
        try:
            # Ana's change first: a leak would arrive before Bob's own.
            users.call("POST", f"/v1/jobs/{users.ana_job}/complete", users.ana, {"result": 1})
            users.call("POST", f"/v1/jobs/{bobs}/complete", users.bob, {"result": 2})
            first = stream.next("job")
            assert first.data["jobId"] == bobs and first.data["userId"] == "bob"
            assert stream.quiet("job", lambda data: data["jobId"] == users.ana_job)
        finally:
            stream.close()


def test_runs_of_another_user_are_404(users: Users) -> None:
    """Ana's run, its events and its cancel answer Bob 404; the same Idempotency-Key gives
    each user a run of their own."""
    headers = {"idempotency-key": "refund-1"}
    body = {"workflowId": "refund", "input": {"order_id": "o-1"}}

    def submit(token: str) -> httpx.Response:
        return httpx.post(
            users.served.url + "/v1/runs",
            headers={"authorization": f"Bearer {token}", **headers},
            json=body,
            timeout=10,
        )

    anas = submit(users.ana)
    assert anas.status_code == 201, anas.text
    run_id = anas.json()["runId"]
    for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events"):
        assert users.call("GET", path, users.bob).status_code == 404
        assert users.call("GET", path, users.ana).status_code == 200
    assert users.call("DELETE", f"/v1/runs/{run_id}", users.bob).status_code == 404
    answer = {"interrupt-1": {"approved": True, "amount": 1}}
    assert users.call("POST", f"/v1/runs/{run_id}/answers", users.bob, answer).status_code == 404
    assert users.call("GET", f"/v1/runs/{run_id}", users.ana).json()["status"] != "cancelled"
    assert run_id not in str(users.call("GET", "/v1/runs", users.bob).json())
    bobs = submit(users.bob)
    assert bobs.status_code == 201 and bobs.json()["runId"] != run_id


def test_post_jobs_tells_nothing_about_other_users_ids(users: Users) -> None:
    """Ana's job id, its bare key, or her (session, call): Bob's POST gets 201 and a job of
    his own every time, exactly as for ids nobody has; a repeat of his own is 200 or 409."""
    answers = {}
    for name, body in {
        "anas full id": {"jobId": users.ana_job},
        "anas key": {"jobId": "export:csv"},
        "nobodys key": {"jobId": "export:never"},
        "anas call": {"sessionId": ANA_SESSION, "callId": users.ana_call},
        "nobodys call": {"sessionId": "s-none", "callId": "c-none"},
    }.items():
        got = users.call("POST", "/v1/jobs", users.bob, {"toolName": "export", **body})
        answers[name] = got.status_code
        assert got.json()["userId"] == "bob", name
        if "jobId" in body:
            assert got.json()["jobId"] == job_id_for(body["jobId"], "bob"), name
    assert set(answers.values()) == {201}, answers
    assert users.served.app.get_job(users.ana_job).user_id == "ana"
    again = {"toolName": "export", "jobId": "export:csv"}
    assert users.call("POST", "/v1/jobs", users.bob, again).status_code == 200
    taken = {"toolName": "export", "sessionId": ANA_SESSION, "callId": users.ana_call}
    assert users.call("POST", "/v1/jobs", users.bob, taken).status_code == 409


def test_post_jobs_finds_the_callers_own_job_under_its_bare_id(users: Users) -> None:
    """A job Bob made before ids were namespaced (the bare id) is his POST's job again (200);
    Ana's POST of the same id gets a job of her own."""
    app = users.served.app
    old = NewJob("legacy:1", "export", {}, CallIds(user_id="bob"), None, cancel_hook=False)
    app.store.create_job(old, holder="old", dispatch_lease=0, dispatch=False)
    body = {"toolName": "export", "jobId": "legacy:1"}
    bobs = users.call("POST", "/v1/jobs", users.bob, body)
    assert bobs.status_code == 200 and bobs.json()["jobId"] == "legacy:1"
    anas = users.call("POST", "/v1/jobs", users.ana, body)
    assert anas.status_code == 201 and anas.json()["jobId"] == job_id_for("legacy:1", "ana")
