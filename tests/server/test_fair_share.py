"""One token cannot take the server's writes for itself: past its share it gets 429.

bob holds his four writes open (their bodies not yet sent, so each is in progress); his fifth
write is refused at once with Retry-After, while alice's writes go through. Once bob's writes
end, his share is free again.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import longcall
from longcall.core.jobs import job_id_for
from longcall.server import runner
from longcall.server.app import Settings
from longcall.server.fair_share import DEFAULT_WRITES_PER_TOKEN
from server.conftest import Api


@contextmanager
def held_write(api: Api, token: str, job_id: str) -> Iterator[socket.socket]:
    """A POST /v1/jobs whose head is sent and whose body is held back until the block ends."""
    url = api.client.base_url
    body = json.dumps({"toolName": "export", "jobId": job_id}).encode()
    sock = socket.create_connection((url.host, url.port), timeout=10)
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nhost: {url.host}\r\nauthorization: Bearer {token}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    try:
        sock.sendall(head.encode() + body[:5])
        yield sock
        sock.sendall(body[5:])
        answer = sock.recv(65536).decode()
        assert answer.startswith("HTTP/1.1 201"), answer
    finally:
        sock.close()


def create(api: Api, token: str, job_id: str) -> int:
    body = {"toolName": "export", "jobId": job_id}
    return api.call("POST", "/v1/jobs", token, body).status_code


def test_a_token_past_its_share_of_writes_gets_429_while_others_write(api: Api) -> None:
    """bob's 5th concurrent write: 429 with Retry-After at once; alice's writes: 201."""
    with (
        held_write(api, api.bob, "bob-1"),
        held_write(api, api.bob, "bob-2"),
        held_write(api, api.bob, "bob-3"),
        held_write(api, api.bob, "bob-4"),
    ):
        time.sleep(0.2)  # the server has read all four heads
        started = time.monotonic()
        refused = api.call("POST", "/v1/jobs", api.bob, {"toolName": "export", "jobId": "bob-5"})
        took = time.monotonic() - started
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "too_many_writes"
        assert took < 1.0
        # Reads are not writes: bob still reads, and alice writes as she likes.
        assert api.call("GET", "/v1/jobs", api.bob).status_code == 200
        assert [create(api, api.alice, f"alice-{i}") for i in range(6)] == [201] * 6
    assert create(api, api.bob, "bob-5") == 201  # his writes ended: his share is free
    mine = {j["jobId"] for j in api.call("GET", "/v1/jobs", api.bob).json()["jobs"]}
    assert {job_id_for(f"bob-{i}", "bob") for i in range(1, 6)} <= mine
    assert DEFAULT_WRITES_PER_TOKEN == 4


def test_the_share_is_a_setting(tmp_path: Path) -> None:
    """``Settings(writes_per_token=1)``: a second write in progress is already refused."""
    app = longcall.App(f"sqlite:///{tmp_path}/share.db")
    token = app.store.create_token(user_id="carol")[1]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = runner.build(app, settings=Settings(writes_per_token=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with httpx.Client(base_url=base, timeout=10) as client:
            api = Api(app, client, token, token, token)
            with held_write(api, token, "c-1"):
                time.sleep(0.2)
                assert create(api, token, "c-2") == 429
            assert create(api, token, "c-2") == 201
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        app.close()
