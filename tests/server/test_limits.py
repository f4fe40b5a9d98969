"""Slow clients against a real server built by ``runner.build``: raw sockets, short deadlines.

Each test opens TCP connections by hand, so it controls exactly which bytes arrive when, and
times how long the server keeps a connection that sends its head or body too slowly. Every
test runs on both timed protocols: httptools (the default) and h11.
"""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import longcall
from longcall import JobState

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.server import runner
from longcall.server.limits import HTTP, TimedH11Protocol, TimedHttpToolsProtocol
from longcall.webhooks import new_secret, sign

TIMEOUT = 1.0  # the header and body deadlines of the server under test
SLACK = 2.0  # how late after its deadline a connection may be closed on a busy machine
SLOW = 1000  # slow connections opened at once


@dataclass
class Live:
    app: longcall.App
    port: int
    secret: str
    errors: list[logging.LogRecord]
    server: runner.Server

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def signed_head(self, body: bytes, *, length: int | None = None) -> bytes:
        """The request line and headers of a signed delivery of ``body``."""
        headers = sign(body, self.secret)
        lines = [
            "POST /v1/hooks/batch HTTP/1.1",
            f"host: 127.0.0.1:{self.port}",
            "content-type: application/json",
            f"content-length: {len(body) if length is None else length}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


class _Errors(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


@pytest.fixture(params=["httptools", "h11"])
def http(request: pytest.FixtureRequest) -> HTTP:
    """Each uvicorn protocol ``runner.build`` can time."""
    name: HTTP = request.param
    return name


@pytest.fixture
def live(tmp_path: Path, request: pytest.FixtureRequest, http: HTTP) -> Iterator[Live]:
    """``runner.build`` serving a SQLite store on a free port, with one-second deadlines.

    A test marked ``@pytest.mark.parametrize("live", [seconds], indirect=True)`` gets others.
    """
    timeout = float(getattr(request, "param", TIMEOUT))
    app = longcall.App(f"sqlite:///{tmp_path / 'limits.db'}")

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    export.invoke({"fmt": "csv"})
    secret = app.store.add_hook_secret("batch", new_secret()).secret
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = runner.build(app, header_timeout=timeout, body_timeout=timeout, http=http)
    errors: list[logging.LogRecord] = []
    handler = _Errors(errors)
    logging.getLogger("uvicorn.error").addHandler(handler)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield Live(app, sock.getsockname()[1], secret, errors, server)
    finally:
        server.should_exit = True
        thread.join(10)
        logging.getLogger("uvicorn.error").removeHandler(handler)
        sock.close()
        app.close()


def read_until_closed(conn: socket.socket, seconds: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took."""
    start = time.monotonic()
    conn.settimeout(seconds)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            data += chunk
    return data, time.monotonic() - start


def read_response(conn: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length, read off a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(
        int(v) for k, _, v in (ln.partition(": ") for ln in lines) if k == "content-length"
    )
    while len(body) < length:
        body += conn.recv(65536)
    return int(lines[0].split()[1]), body


def test_the_server_uses_a_timed_protocol(live: Live, http: HTTP) -> None:
    """runner.build picks the protocol asked for, with deadlines."""
    server = runner.build(live.app, header_timeout=3, body_timeout=7, http=http)
    server.config.load()
    cls = server.config.http_protocol_class
    assert issubclass(cls, {"httptools": TimedHttpToolsProtocol, "h11": TimedH11Protocol}[http])
    assert (cls.header_timeout, cls.body_timeout) == (3.0, 7.0)


def test_answers_are_sent_without_waiting_for_the_clients_ack(live: Live) -> None:
    """The fixture's listening socket is a plain ``socket.socket()`` (proto 0), for which
    asyncio leaves Nagle's algorithm on; the server turns it off on every connection, else
    each answer written in two parts waits ~40 ms for the client's delayed ACK."""
    with live.connect() as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert read_response(conn)[0] == 200
        sockets = [
            c.transport.get_extra_info("socket") for c in live.server.server_state.connections
        ]
        assert sockets, "the server holds no connection"
        for sock in sockets:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_httptools_is_the_default(tmp_path: Path) -> None:
    """Without ``http``, runner.build times uvicorn's httptools protocol."""
    with longcall.App(f"sqlite:///{tmp_path / 'default.db'}") as app:
        server = runner.build(app)
        server.config.load()
        assert issubclass(server.config.http_protocol_class, TimedHttpToolsProtocol)


def test_half_a_request_line_is_closed_after_the_header_timeout(live: Live) -> None:
    """A connection that sends half a request line and stalls is closed, unanswered, in time."""
    with live.connect() as conn:
        conn.sendall(b"GET /heal")
        data, took = read_until_closed(conn, TIMEOUT + SLACK + 5)
    assert data == b""
    assert TIMEOUT * 0.8 <= took <= TIMEOUT + SLACK


def test_a_silent_connection_is_closed_after_the_header_timeout(live: Live) -> None:
    """A connection that sends nothing at all is closed too."""
    with live.connect() as conn:
        data, took = read_until_closed(conn, TIMEOUT + SLACK + 5)
    assert data == b"" and took <= TIMEOUT + SLACK


def test_trickling_the_headers_does_not_extend_the_deadline(live: Live) -> None:
    """A byte of header every 100 ms still meets the deadline set when the request began."""
    head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 200
    with live.connect() as conn:
        start = time.monotonic()
        closed = False
        for byte in head:
            try:
                conn.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.1)
            if time.monotonic() - start > TIMEOUT + SLACK:
                break
        if not closed:
            data, _ = read_until_closed(conn, 1)
            assert data == b""
        assert time.monotonic() - start <= TIMEOUT + SLACK + 1


def test_many_slow_connections_do_not_hold_the_server(live: Live) -> None:
    """A thousand stalled heads: normal requests are answered at once; all are cut off."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 3 * SLOW:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * SLOW), hard))
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW):
            conn = live.connect()
            conn.sendall(b"POST /v1/hooks/batch HTTP/1.1\r\nhost: x\r\nx-slow: ")
            slow.append(conn)
        opened = time.monotonic()
        with httpx.Client(base_url=f"http://127.0.0.1:{live.port}", timeout=5) as client:
            for _ in range(5):
                start = time.monotonic()
                assert client.get("/healthz").status_code == 200
                assert time.monotonic() - start < 0.5
        open_left = set(slow)
        with selectors.DefaultSelector() as sel:
            for conn in slow:
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
            while open_left and time.monotonic() - opened < TIMEOUT + SLACK + 3:
                for key, _ in sel.select(timeout=0.2):
                    conn = key.fileobj  # type: ignore[assignment]
                    with contextlib.suppress(ConnectionResetError):
                        assert conn.recv(1) == b""
                    sel.unregister(conn)
                    open_left.discard(conn)
        assert not open_left, f"{len(open_left)} of {SLOW} slow connections still open"
        # The slow connections were all opened before the clock started: allow for that too.
        assert time.monotonic() - opened <= TIMEOUT + SLACK + 3
    finally:
        for conn in slow:
            conn.close()


def test_a_trickling_body_gets_408_and_nothing_is_written(live: Live) -> None:
    """A body that has not arrived a second after the headers is answered 408 and dropped."""
    body = json.dumps({"jobId": "export:csv", "type": "complete", "result": "x" * 100}).encode()
    with live.connect() as conn:
        conn.sendall(live.signed_head(body))
        start = time.monotonic()
        for i in range(len(body)):
            if time.monotonic() - start > TIMEOUT + SLACK:
                break
            try:
                conn.sendall(body[i : i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.05)
        data, _ = read_until_closed(conn, 5)
        took = time.monotonic() - start
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert json.loads(data.partition(b"\r\n\r\n")[2])["error"]["code"] == "request_timeout"
    assert took <= TIMEOUT + SLACK
    assert live.app.get_job("export:csv").state is JobState.STARTED
    assert live.app.store.inbox("export:csv") == []
    time.sleep(0.2)  # let the app see the disconnect
    assert live.errors == [], [r.getMessage() for r in live.errors]


def test_a_body_shorter_than_its_content_length_gets_408(live: Live) -> None:
    """A Content-Length that promises more than is sent: 408 at the body deadline."""
    body = json.dumps({"jobId": "export:csv", "type": "complete", "result": 1}).encode()
    with live.connect() as conn:
        conn.sendall(live.signed_head(body, length=len(body) + 10) + body)
        data, took = read_until_closed(conn, TIMEOUT + SLACK + 5)
    assert data.startswith(b"HTTP/1.1 408 ") and took <= TIMEOUT + SLACK
    assert live.app.get_job("export:csv").state is JobState.STARTED
    assert live.app.store.inbox("export:csv") == []


def test_5mb_content_length_is_413_before_any_body_is_sent(live: Live) -> None:
    """The 413 for a 5 MB Content-Length comes back while not one byte of body was sent."""
    with live.connect() as conn:
        conn.sendall(live.signed_head(b"{}", length=5_000_000))
        status, body = read_response(conn)
        assert status == 413 and json.loads(body)["error"]["code"] == "too_large"
        # A sender that goes on trickling its body after the answer is cut off as well.
        start = time.monotonic()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while time.monotonic() - start < TIMEOUT + SLACK + 1:
                conn.sendall(b"x" * 100)
                time.sleep(0.05)
        data, _ = read_until_closed(conn, 2)
    assert data == b""
    assert time.monotonic() - start <= TIMEOUT + SLACK + 1
    assert live.app.store.inbox("export:csv") == []


@pytest.mark.parametrize("live", [3.0], indirect=True)
def test_after_an_early_413_the_drained_connection_serves_the_next_requests(live: Live) -> None:
    """Once a body answered early has been sent whole, the next request has its own clocks."""
    size = 1_100_000  # over the 1 MiB limit
    body = json.dumps({"jobId": "export:csv", "type": "progress", "progress": 1}).encode()
    with live.connect() as conn:
        start = time.monotonic()
        conn.sendall(live.signed_head(b"{}", length=size))
        assert read_response(conn)[0] == 413
        conn.sendall(b"x" * size)
        time.sleep(max(0.0, start + 1.5 - time.monotonic()))
        conn.sendall(live.signed_head(body))
        # Past the first request's body deadline (3 s), inside this one's (4.5 s).
        time.sleep(max(0.0, start + 3.8 - time.monotonic()))
        conn.sendall(body)
        assert read_response(conn)[0] == 200
        # Half of the next head, sent with the end of a body, is on the header clock.
        conn.sendall(live.signed_head(b"{}", length=size))
        assert read_response(conn)[0] == 413
        conn.sendall(b"x" * size + b"GET /hea")
        data, took = read_until_closed(conn, 3.0 + SLACK + 5)
    assert data == b"" and took <= 3.0 + SLACK
    assert [r["outcome"] for r in live.app.store.inbox("export:csv")] == ["applied"]


def test_a_keep_alive_client_idle_longer_than_the_header_timeout_still_works(live: Live) -> None:
    """Idle time between requests on a kept-alive connection is not counted as a slow head."""
    request = f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{live.port}\r\n\r\n".encode()
    with live.connect() as conn:
        for _ in range(3):
            conn.sendall(request)
            assert read_response(conn) == (200, b'{"status":"ok"}')
            time.sleep(TIMEOUT * 1.5)
        conn.sendall(request)
        assert read_response(conn)[0] == 200
    with httpx.Client(base_url=f"http://127.0.0.1:{live.port}", timeout=5) as client:
        body = json.dumps({"jobId": "export:csv", "type": "progress", "progress": 1}).encode()
        for _ in range(20):
            headers = {**sign(body, live.secret), "content-type": "application/json"}
            assert client.post("/v1/hooks/batch", content=body, headers=headers).status_code == 200
    assert len(live.app.store.inbox("export:csv")) == 20
