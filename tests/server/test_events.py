"""Server-sent event streams over a real server: live changes, resuming, who sees what."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall import job_id_for
from server.conftest import Api

# The api fixture's jobs, in their owners' namespaces.
CSV = job_id_for("export:csv", "alice")
JSON_ID = job_id_for("export:json", "bob")

WAIT = 10.0  # seconds; streams poll every half second


@dataclass
class Message:
    event: str
    data: Any
    id: str | None


class Stream:
    """An open event stream read by a thread; ``next`` waits for the next message."""

    def __init__(self, client: httpx.Client, path: str, token: str, **headers: str) -> None:
        self.messages: queue.Queue[Message | BaseException] = queue.Queue()
        self.response: httpx.Response | None = None
        self.opened = threading.Event()
        self._closing = False
        headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream", **headers}
        self._thread = threading.Thread(
            target=self._read, args=(client, path, headers), daemon=True
        )
        self._thread.start()
        assert self.opened.wait(WAIT), "the stream did not open"

    def _read(self, client: httpx.Client, path: str, headers: dict[str, str]) -> None:
        fields: dict[str, str] = {}
        try:
            with client.stream("GET", path, headers=headers, timeout=None) as response:
                self.response = response
                self.opened.set()
                for line in response.iter_lines():
                    if line.startswith(":"):
                        continue
                    if line:
                        name, _, value = line.partition(": ")
                        fields[name] = value
                        continue
                    if "event" in fields:
                        data = json.loads(fields["data"])
                        self.messages.put(Message(fields["event"], data, fields.get("id")))
                    fields = {}
        except BaseException as exc:  # the test reads it; closing ends the read on purpose
            if not self._closing:
                self.messages.put(exc)
        finally:
            self.opened.set()

    def next(self, event: str, where: Any = lambda data: True) -> Message:
        """The next ``event`` message whose data satisfies ``where`` (others are skipped)."""
        while True:
            got = self.messages.get(timeout=WAIT)
            if isinstance(got, BaseException):
                raise got
            if got.event == event and where(got.data):
                return got

    def quiet(self, event: str, where: Any, seconds: float = 1.5) -> bool:
        """Whether no matching message arrives within ``seconds``."""
        try:
            while True:
                got = self.messages.get(timeout=seconds)
                if isinstance(got, Message) and got.event == event and where(got.data):
                    return False
        except queue.Empty:
            return True

    def close(self) -> None:
        self._closing = True
        if self.response is not None:
            self.response.close()


@pytest.fixture
def streams(api: Api) -> Iterator[list[Stream]]:
    opened: list[Stream] = []
    yield opened
    for stream in opened:
        stream.close()


def open_stream(api: Api, streams: list[Stream], path: str, token: str, **headers: str) -> Stream:
    stream = Stream(api.client, path, token, **headers)
    streams.append(stream)
    assert stream.response is not None
    return stream


def job_is(job_id: str, state: str | None = None) -> Any:
    return lambda data: data["jobId"] == job_id and (state is None or data["state"] == state)


def test_a_new_job_and_its_completion_arrive_live(api: Api, streams: list[Stream]) -> None:
    stream = open_stream(api, streams, "/v1/events", api.admin)
    assert stream.response is not None
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    created = api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "q1"})
    assert created.status_code == 201
    first = stream.next("job", job_is("q1", "started"))
    assert first.id
    api.call("POST", "/v1/jobs/q1/complete", api.admin, {"result": {"rows": 3}})
    done = stream.next("job", job_is("q1", "succeeded"))
    assert done.data["result"] == {"rows": 3}


def test_a_stream_starts_from_now(api: Api, streams: list[Stream]) -> None:
    """Jobs that existed before the stream opened are not replayed (GET /v1/jobs has them)."""
    stream = open_stream(api, streams, "/v1/events", api.admin)
    assert stream.quiet("job", lambda data: True)


def test_a_user_sees_only_their_own_jobs(api: Api, streams: list[Stream]) -> None:
    alice = open_stream(api, streams, "/v1/events", api.alice)
    api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "bobs", "userId": "bob"})
    api.call(
        "POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "alices", "userId": "alice"}
    )
    assert alice.next("job", lambda data: True).data["jobId"] == "alices"
    api.call("POST", f"/v1/jobs/{JSON_ID}/complete", api.bob, {"result": 1})
    assert alice.quiet("job", lambda data: data["userId"] != "alice")


def test_last_event_id_resumes_after_a_disconnect(api: Api, streams: list[Stream]) -> None:
    stream = open_stream(api, streams, "/v1/events", api.admin)
    api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "before"})
    seen = stream.next("job", job_is("before"))
    stream.close()
    api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "while-away"})
    assert seen.id is not None
    again = open_stream(api, streams, "/v1/events", api.admin, **{"last-event-id": seen.id})
    assert again.next("job", job_is("while-away")).data["state"] == "started"


def test_a_jobs_event_log_streams_and_resumes_from_its_seq(api: Api, streams: list[Stream]) -> None:
    path = f"/v1/jobs/{CSV}/events"
    stream = open_stream(api, streams, path, api.alice)
    assert stream.next("job", lambda data: True).data["jobId"] == CSV
    for percent in (10, 20):
        api.call("POST", f"/v1/jobs/{CSV}/progress", api.alice, {"progress": percent})
    tenth = stream.next("event", lambda data: data["data"]["data"] == 10)
    assert tenth.id == str(tenth.data["seq"])
    stream.close()
    again = open_stream(api, streams, path, api.alice, **{"last-event-id": tenth.id or ""})
    after = again.next("event", lambda data: True)
    assert after.data["data"]["data"] == 20 and after.data["seq"] > tenth.data["seq"]


def test_the_event_log_is_still_json_without_the_stream_header(api: Api) -> None:
    got = api.call("GET", f"/v1/jobs/{CSV}/events", api.alice)
    assert got.status_code == 200 and got.json() == {"events": []}


@pytest.mark.parametrize(
    ("path", "token_of", "headers", "status"),
    [
        (f"/v1/jobs/{JSON_ID}/events", "alice", {}, 404),  # bob's job
        ("/v1/jobs/nope/events", "admin", {}, 404),
        (f"/v1/jobs/{CSV}/events", "alice", {"last-event-id": "x1"}, 422),
        ("/v1/events", "admin", {"last-event-id": "not-a-cursor!"}, 422),
        ("/v1/events", None, {}, 401),
    ],
)
def test_streams_refuse_what_they_cannot_serve(
    api: Api, path: str, token_of: str | None, headers: dict[str, str], status: int
) -> None:
    token = getattr(api, token_of) if token_of else None
    got = api.call("GET", path, token, headers={"accept": "text/event-stream", **headers})
    assert got.status_code == status
    assert got.json()["error"]["message"]


def test_open_streams_share_one_look_at_the_store(
    api: Api, streams: list[Stream], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty open streams cost the store what one does: the server looks for changes once
    per poll for all of them (its change feed), and each stream still gets every change its
    caller may see, and nothing else."""
    looks: list[float] = []
    changed_jobs = api.app.monitor.changed_jobs

    def counted(*args: Any, **kwargs: Any) -> Any:
        looks.append(time.monotonic())
        return changed_jobs(*args, **kwargs)

    monkeypatch.setattr(api.app.monitor, "changed_jobs", counted)

    def looks_per_second(seconds: float = 3.0) -> float:
        start = time.monotonic()
        time.sleep(seconds)
        return len([t for t in looks if t >= start]) / seconds

    first = open_stream(api, streams, "/v1/events", api.admin)
    one = looks_per_second()
    admins = [first] + [open_stream(api, streams, "/v1/events", api.admin) for _ in range(9)]
    alices = [open_stream(api, streams, "/v1/events", api.alice) for _ in range(10)]
    twenty = looks_per_second()
    assert 0 < one <= 4 and twenty <= one + 1, (one, twenty)  # polls every 0.5 s

    api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "b1", "userId": "bob"})
    api.call("POST", "/v1/jobs", api.admin, {"toolName": "sql", "jobId": "a1", "userId": "alice"})
    for stream in admins:
        stream.next("job", job_is("b1"))
        stream.next("job", job_is("a1"))
    for stream in alices:
        assert stream.next("job", lambda data: True).data["jobId"] == "a1"
