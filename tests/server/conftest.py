"""A live uvicorn server in a thread, for tests that talk real HTTP."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx
import uvicorn

from longcall.server import create_app


@contextlib.contextmanager
def live_server(app: longcall.App) -> Iterator[httpx.Client]:
    """Serve ``app`` on a free local port; yield a client whose base URL points at it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(app), log_level="warning"))
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
