"""A live uvicorn server in a thread, for tests that talk real HTTP."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pytest

import longcall
from longcall import CallIds

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.server import runner


@contextlib.contextmanager
def live_server(app: longcall.App) -> Iterator[httpx.Client]:
    """Serve ``app`` on a free local port; yield a client whose base URL points at it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = runner.build(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def live() -> Callable[[longcall.App], AbstractContextManager[httpx.Client]]:
    """:func:`live_server`, for tests to serve the App they built."""
    return live_server


@dataclass
class Api:
    app: longcall.App
    client: httpx.Client
    alice: str
    bob: str
    admin: str

    def call(
        self, method: str, path: str, token: str | None, body: Any = None, **options: Any
    ) -> httpx.Response:
        headers = dict(options.pop("headers", {}))
        if token:
            headers["authorization"] = f"Bearer {token}"
        if body is not None:
            options["json"] = body
        return self.client.request(method, path, headers=headers, **options)


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    """A live server; alice owns export:csv, bob owns export:json; three tokens."""
    app = longcall.App(db_url)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    export.invoke({"fmt": "csv"}, CallIds("exports", "alice", "s-a", "c-a", "i-a"))
    export.invoke({"fmt": "json"}, CallIds("exports", "bob", "s-b", "c-b", "i-b"))
    tokens = [app.store.create_token(user_id=u)[1] for u in ("alice", "bob")]
    admin = app.store.create_token(user_id=None, admin=True)[1]
    with live(app) as client:
        yield Api(app, client, tokens[0], tokens[1], admin)
    app.close()
