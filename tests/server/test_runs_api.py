"""/v1/runs over a real server, on SQLite and PostgreSQL: submit, list, cancel, answer, follow.

Runs are executed by a worker in the test (``app.run_worker`` in a thread of its own) or by
hand with ``app.continue_run``; every refusal is checked to have changed nothing in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pydantic
import pytest

import longcall
from longcall import RunStatus, TaskContext
from procs import sql_rows

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from server.conftest import Api

WAIT = 10.0  # seconds


class Order(pydantic.BaseModel):
    order_id: str
    amount: int


class Approval(pydantic.BaseModel):
    approved: bool
    note: str = ""


@dataclass
class Runs(Api):
    gate: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)


def register(app: longcall.App, gate: threading.Event, holding: threading.Event) -> None:
    """refund (an order, an approval question, a task), flaky (always fails), hold (waits)."""

    @app.task(name="charge")
    def charge(amount: int) -> str:
        return f"charged {amount}"

    @app.workflow("refund")
    def refund(order: Order, ctx: TaskContext) -> dict[str, Any]:
        ctx.emit("started", {"orderId": order.order_id})
        answer = ctx.interrupt("Approve the refund?", schema=Approval)
        if not answer.approved:
            return {"refunded": False}
        receipt = charge(order.amount)
        ctx.emit("charged", receipt)
        return {"refunded": True, "receipt": receipt, "note": answer.note}

    @app.workflow("flaky")
    def flaky(_: None) -> None:
        raise RuntimeError("the service is down")

    @app.task(name="wait_for_gate")
    def wait_for_gate() -> None:
        holding.set()
        gate.wait(WAIT)

    @app.task(name="after_gate")
    def after_gate() -> None:
        pass

    @app.workflow("hold")
    def hold(_: None) -> str:
        wait_for_gate()
        after_gate()
        return "done"


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Runs]:
    """A live server whose App has the workflows above; alice, bob and admin tokens."""
    app = longcall.App(db_url, run_retry="10ms")
    gate, holding = threading.Event(), threading.Event()
    register(app, gate, holding)
    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    try:
        with live(app) as client:
            yield Runs(app, client, alice, bob, admin, gate, holding)
    finally:
        gate.set()
        app.close()


@contextlib.contextmanager
def worker(app: longcall.App) -> Iterator[None]:
    """A run worker in a thread with its own event loop, stopped (drained) at the end."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await app.run_worker(poll_interval=0.05).run(box["stop"])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(WAIT)
    try:
        yield
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(WAIT)


def wait_for(api: Api, run_id: str, *statuses: RunStatus) -> longcall.Run:
    deadline = time.monotonic() + WAIT
    while True:
        run = api.app.store.get_run(run_id)
        if run.status in statuses:
            return run
        assert time.monotonic() < deadline, f"{run_id} is {run.status}, not {statuses}"
        time.sleep(0.02)


def snapshot(api: Api) -> list[Any]:
    """Every run, interrupt and event row, read outside longcall."""
    return [
        sql_rows(api.app.url, f"SELECT * FROM {table} ORDER BY 1, 2")
        for table in ("lc_runs", "lc_run_interrupts", "lc_run_events")
    ]


def submit(api: Api, token: str, workflow: str = "refund", **body: Any) -> dict[str, Any]:
    payload = {"workflowId": workflow, **body}
    if workflow == "refund" and "input" not in body:
        payload["input"] = {"order_id": "o-1", "amount": 30}
    got = api.call("POST", "/v1/runs", token, payload)
    assert got.status_code == 201, got.text
    return dict(got.json())


def waiting_refund(api: Api, token: str | None = None) -> str:
    """A refund run of alice's (by default), executed by hand up to its question."""
    run_id = str(submit(api, token or api.alice)["runId"])
    assert api.app.continue_run(run_id).status is RunStatus.WAITING_INPUT
    return run_id


# -- submitting -------------------------------------------------------------------------------


def test_submit_queues_a_run_for_the_user_and_only_they_and_admin_see_it(api: Runs) -> None:
    """201 queued with the run's id; alice's run is hers: bob gets 404 everywhere, admin sees it."""
    created = submit(api, api.alice, maxRetries=2, timeoutSecs=30)
    assert created["status"] == "queued" and created["runId"].startswith("run-")
    assert created["createdAt"] and created["userId"] == "alice"
    assert (created["retryCount"], created["retriesRemaining"]) == (0, 2)
    assert created["pendingInterrupts"] == [] and created["steps"] == []
    run = api.app.store.get_run(created["runId"])
    assert (run.user_id, run.max_retries, run.timeout_secs) == ("alice", 2, 30)
    assert run.input == {"order_id": "o-1", "amount": 30}

    path = f"/v1/runs/{created['runId']}"
    shown = api.call("GET", path, api.alice).json()
    assert shown["runId"] == created["runId"] and shown["workflowId"] == "refund"
    before = snapshot(api)
    for method, suffix, body in [
        ("GET", "", None),
        ("DELETE", "", None),
        ("GET", "/events", None),
        ("POST", "/answers", {"interrupt-1": {"approved": True}}),
    ]:
        got = api.call(method, path + suffix, api.bob, body)
        assert got.status_code == 404, (method, suffix)
        assert got.json()["error"] == {
            "code": "run_not_found",
            "message": f"no run with id {created['runId']!r}",
            "field": "runId",
        }
    assert snapshot(api) == before
    assert api.call("GET", path, api.admin).status_code == 200
    assert api.call("GET", "/v1/runs/run-nope", api.alice).status_code == 404


def test_an_unregistered_workflow_is_404_and_queues_nothing(api: Runs) -> None:
    """A workflow the server's App does not have answers 404 naming workflowId."""
    before = snapshot(api)
    got = api.call("POST", "/v1/runs", api.alice, {"workflowId": "nope", "input": {}})
    assert got.status_code == 404
    assert got.json()["error"]["code"] == "workflow_not_found"
    assert got.json()["error"]["field"] == "workflowId"
    assert snapshot(api) == before


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"workflowId": "refund", "input": {"order_id": "o"}}, "invalid_input", "input.amount"),
        (
            {"workflowId": "refund", "input": {"order_id": "o", "amount": "lots"}},
            "invalid_input",
            "input.amount",
        ),
        ({"workflowId": "refund", "input": [1]}, "invalid_input", "input"),
        ({"input": {}}, "invalid_body", "workflowId"),
        ({"workflowId": "refund", "maxRetries": -1}, "invalid_body", "maxRetries"),
        ({"workflowId": "refund", "timeoutSecs": 0}, "invalid_body", "timeoutSecs"),
        ({"workflowId": "refund", "userId": "bob"}, "invalid_body", "userId"),
        ({"workflowId": "refund", "extra": 1}, "invalid_body", "extra"),
    ],
)
def test_a_bad_submission_is_422_naming_the_field(
    api: Runs, body: dict[str, Any], code: str, field: str
) -> None:
    """Input that does not fit the workflow's input type, or a wrong field: 422, nothing queued."""
    before = snapshot(api)
    got = api.call("POST", "/v1/runs", api.alice, body)
    assert got.status_code == 422, got.text
    assert (got.json()["error"]["code"], got.json()["error"]["field"]) == (code, field)
    assert snapshot(api) == before


def test_malformed_submissions_are_4xx(api: Runs) -> None:
    """Not JSON 400, wrong content type 415, too large 413, no token 401: nothing queued."""
    before = snapshot(api)
    headers = {"authorization": f"Bearer {api.alice}", "content-type": "application/json"}
    assert api.client.post("/v1/runs", content=b"{nope", headers=headers).status_code == 400
    big = b'{"workflowId": "refund", "input": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert api.client.post("/v1/runs", content=big, headers=headers).status_code == 413
    text = {**headers, "content-type": "text/plain"}
    assert api.client.post("/v1/runs", content=b"{}", headers=text).status_code == 415
    assert api.call("POST", "/v1/runs", None, {"workflowId": "refund"}).status_code == 401
    assert api.call("GET", "/v1/runs", None).status_code == 401
    assert snapshot(api) == before


def test_an_idempotency_key_returns_the_same_run(api: Runs) -> None:
    """The same key again answers 200 with the same run; another user's same key is their own
    run; the key with another input is refused with 422 and queues nothing."""
    body = {"workflowId": "refund", "input": {"order_id": "o-7", "amount": 7}}
    key = {"idempotency-key": "refund-o-7"}
    first = api.call("POST", "/v1/runs", api.alice, body, headers=key)
    assert first.status_code == 201
    again = api.call("POST", "/v1/runs", api.alice, body, headers=key)
    assert again.status_code == 200 and again.json() == first.json()
    bobs = api.call("POST", "/v1/runs", api.bob, body, headers=key)
    assert bobs.status_code == 201 and bobs.json()["runId"] != first.json()["runId"]
    assert bobs.json()["userId"] == "bob"

    before = snapshot(api)
    other = {**body, "input": {"order_id": "o-8", "amount": 8}}
    reused = api.call("POST", "/v1/runs", api.alice, other, headers=key)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    too_long = api.call("POST", "/v1/runs", api.alice, body, headers={"idempotency-key": "k" * 256})
    assert too_long.status_code == 422 and too_long.json()["error"]["field"] == "Idempotency-Key"
    assert snapshot(api) == before
    assert len(sql_rows(api.app.url, "SELECT run_id FROM lc_runs")) == 2


# -- listing ----------------------------------------------------------------------------------


def test_list_filters_by_status_and_workflow_and_pages_with_a_cursor(api: Runs) -> None:
    """status and workflow narrow the list; the cursor walks it without repeats; users see
    their own runs only; bad query parameters are 422."""
    ids = [submit(api, api.alice)["runId"] for _ in range(3)]
    flaky = submit(api, api.alice, "flaky")["runId"]
    bobs = submit(api, api.bob)["runId"]
    api.app.continue_run(ids[0])

    def listed(token: str, **params: Any) -> list[str]:
        got = api.call("GET", "/v1/runs", token, params=params)
        assert got.status_code == 200, got.text
        return [r["runId"] for r in got.json()["runs"]]

    assert set(listed(api.alice)) == {*ids, flaky}
    assert listed(api.alice)[0] == flaky  # newest first
    assert listed(api.alice, status="waiting_input") == [ids[0]]
    assert set(listed(api.alice, status="queued")) == {ids[1], ids[2], flaky}
    assert listed(api.alice, workflow="flaky") == [flaky]
    assert listed(api.alice, workflow="refund", status="completed") == []
    assert set(listed(api.admin)) == {*ids, flaky, bobs}
    assert listed(api.admin, user="bob") == [bobs]
    assert listed(api.bob, user="alice") == [bobs]  # only an admin picks the user

    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.call("GET", "/v1/runs", api.admin, params=params).json()
        assert len(page["runs"]) <= 2
        seen += [r["runId"] for r in page["runs"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted([*ids, flaky, bobs])

    for params in ({"status": "bogus"}, {"cursor": "!!"}, {"limit": 0}, {"limit": "²"}):
        got = api.call("GET", "/v1/runs", api.alice, params=params)
        assert got.status_code == 422 and got.json()["error"]["field"] == next(iter(params))


# -- cancelling -------------------------------------------------------------------------------


def test_cancel_ends_a_queued_or_waiting_run_and_leaves_a_finished_one(api: Runs) -> None:
    """DELETE cancels a queued run and a waiting one at once; on a finished run it answers 200
    with the run unchanged."""
    queued = submit(api, api.alice)["runId"]
    got = api.call("DELETE", f"/v1/runs/{queued}", api.alice)
    assert got.status_code == 200
    assert got.json()["status"] == "cancelled" and got.json()["cancelRequested"] is True
    assert api.app.store.get_run(queued).status is RunStatus.CANCELLED

    waiting = waiting_refund(api)
    got = api.call("DELETE", f"/v1/runs/{waiting}", api.alice)
    assert got.json()["status"] == "cancelled" and got.json()["pendingInterrupts"] == []

    done = waiting_refund(api)
    api.app.answer(done, {"interrupt-1": {"approved": False}})
    before = snapshot(api)
    for run_id, status in ((done, "completed"), (queued, "cancelled")):
        again = api.call("DELETE", f"/v1/runs/{run_id}", api.alice)
        assert again.status_code == 200 and again.json()["status"] == status
    assert api.call("DELETE", "/v1/runs/run-nope", api.alice).status_code == 404
    assert snapshot(api) == before


def test_cancel_reaches_a_running_run_on_a_worker(api: Runs) -> None:
    """A run busy in a task answers running with cancelRequested, and stops at its next call."""
    with worker(api.app):
        run_id = submit(api, api.alice, "hold")["runId"]
        assert api.holding.wait(WAIT)
        got = api.call("DELETE", f"/v1/runs/{run_id}", api.alice)
        assert got.status_code == 200
        assert got.json()["status"] == "running" and got.json()["cancelRequested"] is True
        api.gate.set()
        run = wait_for(api, run_id, RunStatus.CANCELLED, RunStatus.COMPLETED)
    assert run.status is RunStatus.CANCELLED
    assert [s.name for s in api.app.store.run_steps(run_id)] == ["wait_for_gate"]


# -- reading ----------------------------------------------------------------------------------


def test_a_failed_run_shows_every_attempts_error(api: Runs) -> None:
    """retryCount, retriesRemaining and errors record each failed attempt."""
    run_id = submit(api, api.alice, "flaky", maxRetries=1)["runId"]
    assert api.app.continue_run(run_id).status is RunStatus.QUEUED  # retried
    retried = api.call("GET", f"/v1/runs/{run_id}", api.alice).json()
    assert (retried["retryCount"], retried["retriesRemaining"]) == (1, 0)
    assert api.app.continue_run(run_id).status is RunStatus.FAILED
    failed = api.call("GET", f"/v1/runs/{run_id}", api.alice).json()
    assert failed["status"] == "failed" and failed["finishedAt"]
    assert failed["error"]["type"] == "RuntimeError"
    assert [(e["attempt"], e["message"]) for e in failed["errors"]] == [
        (1, "the service is down"),
        (2, "the service is down"),
    ]


# -- answering --------------------------------------------------------------------------------


def test_answers_are_checked_against_the_schema_then_a_worker_completes_it(api: Runs) -> None:
    """A wrong type is 422 naming the field and the run still waits; a right answer is 202, and
    the worker resumes the run to its end."""
    with worker(api.app):
        run_id = submit(api, api.alice)["runId"]
        wait_for(api, run_id, RunStatus.WAITING_INPUT)
        path = f"/v1/runs/{run_id}"
        shown = api.call("GET", path, api.alice).json()
        assert shown["status"] == "waiting_input"
        [question] = shown["pendingInterrupts"]
        assert question["key"] == "interrupt-1" and question["prompt"] == "Approve the refund?"
        assert question["schema"]["properties"]["approved"] == {
            "title": "Approved",
            "type": "boolean",
        }
        assert question["error"] is None

        before = snapshot(api)
        wrong = api.call("POST", path + "/answers", api.alice, {"interrupt-1": {"approved": "yes"}})
        assert wrong.status_code == 422
        problem = wrong.json()["error"]
        assert problem["code"] == "invalid_answer"
        assert problem["field"] == "interrupt-1.approved"
        assert "'yes' is not of type 'boolean'" in problem["message"]
        missing = api.call("POST", path + "/answers", api.alice, {"interrupt-1": {"note": 1}})
        fields = [(e["field"], e["message"]) for e in missing.json()["error"]["errors"]]
        assert fields == [
            ("interrupt-1", "'approved' is a required property"),
            ("interrupt-1.note", "1 is not of type 'string'"),
        ]
        for body in ({"continue": True}, {}):
            bad_key = api.call("POST", path + "/answers", api.alice, body)
            assert (
                bad_key.status_code == 422 and bad_key.json()["error"]["code"] == "invalid_answer"
            )
        assert api.call("POST", path + "/answers", api.alice, [1]).status_code == 422
        time.sleep(0.2)  # a worker that wrongly got the run would have moved it by now
        assert snapshot(api) == before
        assert api.app.store.get_run(run_id).status is RunStatus.WAITING_INPUT

        answer = {"interrupt-1": {"approved": True, "note": "ok by me"}}
        accepted = api.call("POST", path + "/answers", api.alice, answer)
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["status"] in ("queued", "running", "completed")
        run = wait_for(api, run_id, RunStatus.COMPLETED, RunStatus.FAILED)
    assert run.result == {"refunded": True, "receipt": "charged 30", "note": "ok by me"}
    done = api.call("GET", path, api.alice).json()
    assert done["pendingInterrupts"] == [] and [s["name"] for s in done["steps"]] == ["charge"]
    again = api.call("POST", path + "/answers", api.alice, answer)
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_not_waiting"


def test_answers_to_a_run_not_waiting_are_409_and_change_nothing(api: Runs) -> None:
    """A queued run, or one cancelled, is not waiting: 409, no answer stored."""
    queued = submit(api, api.alice)["runId"]
    cancelled = waiting_refund(api)
    api.app.cancel_run(cancelled)
    before = snapshot(api)
    for run_id in (queued, cancelled):
        got = api.call(
            "POST", f"/v1/runs/{run_id}/answers", api.alice, {"interrupt-1": {"approved": True}}
        )
        assert got.status_code == 409 and got.json()["error"]["field"] == "runId"
    assert snapshot(api) == before


def test_the_old_resume_path_still_answers_and_says_it_is_deprecated(api: Runs) -> None:
    """POST /v1/runs/{runId}/resume answers as /answers does for one release, with a
    Deprecation header and a Link to the new path."""
    run_id = waiting_refund(api)
    got = api.call(
        "POST", f"/v1/runs/{run_id}/resume", api.alice, {"interrupt-1": {"approved": True}}
    )
    assert got.status_code == 202 and got.json()["status"] == "queued"
    assert got.headers["deprecation"] == "true"
    assert got.headers["link"] == f'</v1/runs/{run_id}/answers>; rel="successor-version"'


def test_an_answer_to_a_question_not_asked_yet_is_accepted(api: Runs) -> None:
    """interrupt-2 has no schema yet: it is stored as it is, beside a valid interrupt-1."""
    run_id = waiting_refund(api)
    answers = {"interrupt-1": {"approved": False}, "interrupt-2": "anything"}
    got = api.call("POST", f"/v1/runs/{run_id}/answers", api.alice, answers)
    assert got.status_code == 202 and got.json()["status"] == "queued"
    assert api.app.continue_run(run_id).result == {"refunded": False}


def test_an_answer_to_a_question_never_asked_is_422_and_nothing_runs(api: Runs) -> None:
    """interrupt-7, or interrupt-3 skipping interrupt-2, is 422 naming the key; with a worker
    running nothing is stored and the run is not executed again."""
    run_id = waiting_refund(api)
    path = f"/v1/runs/{run_id}/answers"
    right = {"approved": True}
    with worker(api.app):
        before = snapshot(api)
        for body, keys in (
            ({"interrupt-7": right}, ["interrupt-7"]),
            ({"interrupt-1": right, "interrupt-3": 1}, ["interrupt-3"]),
            ({"interrupt-2": 1}, ["interrupt-2"]),
        ):
            got = api.call("POST", path, api.alice, body)
            assert got.status_code == 422, got.text
            problem = got.json()["error"]
            assert problem["code"] == "invalid_answer"
            assert [e["field"] for e in problem["errors"]] == keys
            assert f"the run has not asked {keys[0]}" in problem["message"]
        time.sleep(0.2)  # a worker that wrongly got the run would have moved it by now
        assert snapshot(api) == before
    run = api.app.store.get_run(run_id)
    assert (run.status, run.executions) == (RunStatus.WAITING_INPUT, 1)


# -- the event log ----------------------------------------------------------------------------


@dataclass
class Message:
    event: str
    data: Any
    id: str | None


class Stream:
    """A server-sent event stream read by a thread; ``ended`` once the server closed it."""

    def __init__(self, api: Api, path: str, **headers: str) -> None:
        self.messages: queue.Queue[Message] = queue.Queue()
        self.ended = threading.Event()
        self.status: int | None = None
        self._response: httpx.Response | None = None
        opened = threading.Event()
        headers = {"authorization": f"Bearer {api.alice}", "accept": "text/event-stream", **headers}

        def read() -> None:
            fields: dict[str, str] = {}
            try:
                with api.client.stream("GET", path, headers=headers, timeout=None) as response:
                    self.status, self._response = response.status_code, response
                    opened.set()
                    for line in response.iter_lines():
                        if line and not line.startswith(":"):
                            name, _, value = line.partition(": ")
                            fields[name] = value
                        elif not line and "event" in fields:
                            data = json.loads(fields["data"])
                            self.messages.put(Message(fields["event"], data, fields.get("id")))
                            fields = {}
                self.ended.set()
            except httpx.HTTPError:
                pass  # closed by the test
            finally:
                opened.set()

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()
        assert opened.wait(WAIT)

    def next(self, where: Callable[[Message], bool] = lambda m: True) -> Message:
        while True:
            got = self.messages.get(timeout=WAIT)
            if where(got):
                return got

    def rest(self) -> list[Message]:
        assert self.ended.wait(WAIT), "the stream did not end"
        found = []
        while not self.messages.empty():
            found.append(self.messages.get_nowait())
        return found

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
        self._thread.join(WAIT)


def test_the_event_stream_follows_a_run_to_its_end_and_resumes_from_last_event_id(
    api: Runs,
) -> None:
    """The stream sends the run and its events live, ends after the run completes, and a
    reconnect with Last-Event-ID gets only what came after; without the Accept header, JSON."""
    run_id = waiting_refund(api)
    path = f"/v1/runs/{run_id}/events"
    stream = Stream(api, path)
    try:
        assert stream.status == 200
        first = stream.next()
        assert (first.event, first.id, first.data["kind"]) == ("event", "1", "started")
        opened = stream.next(lambda m: m.event == "run")
        assert opened.data["status"] == "waiting_input"
        assert opened.data["pendingInterrupts"][0]["key"] == "interrupt-1"
        assert not stream.ended.wait(1.0)  # a waiting run may go on: the stream stays open

        answer = {"interrupt-1": {"approved": True}}
        assert api.call("POST", f"/v1/runs/{run_id}/answers", api.alice, answer).status_code == 202
        api.app.continue_run(run_id)
        charged = stream.next(lambda m: m.event == "event")
        assert (charged.id, charged.data["kind"], charged.data["data"]) == (
            "2",
            "charged",
            "charged 30",
        )
        last = [m for m in stream.rest() if m.event == "run"][-1]
        assert last.data["status"] == "completed" and last.data["result"]["refunded"] is True
    finally:
        stream.close()

    again = Stream(api, path, **{"last-event-id": "1"})
    try:
        got = again.rest()
        assert [(m.event, m.id) for m in got] == [("event", "2"), ("run", None)]
        assert got[1].data["status"] == "completed"
    finally:
        again.close()

    listed = api.call("GET", path, api.alice).json()["events"]
    assert [(e["seq"], e["kind"]) for e in listed] == [(1, "started"), (2, "charged")]
    after = api.call("GET", path, api.alice, params={"after": 1}).json()["events"]
    assert [e["seq"] for e in after] == [2]
    for bad_id in ("x", "9" * 30):
        bad = api.call("GET", path, api.alice, headers={"last-event-id": bad_id})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "after"
