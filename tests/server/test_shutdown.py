"""`longcall serve` stops promptly on SIGTERM while clients hold event streams open.

uvicorn waits for open connections before it exits, and an event stream never ends by itself:
the server must end the streams when shutdown begins, or SIGTERM hangs until the graceful
timeout cancels them mid-stream.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

import longcall
from longcall.cli.main import main

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from server.test_serve_cli import free_port, wait_until_healthy

STREAMS = 3


@dataclass
class Stream:
    """One client reading ``GET /v1/events`` in a thread until the server ends it."""

    url: str
    token: str
    connected: threading.Event = field(default_factory=threading.Event)
    status: int | None = None
    ended_cleanly: bool = False
    error: BaseException | None = None

    def read(self) -> None:
        headers = {"authorization": f"Bearer {self.token}", "accept": "text/event-stream"}
        try:
            with httpx.stream(
                "GET", self.url, headers=headers, timeout=httpx.Timeout(5, read=30)
            ) as got:
                self.status = got.status_code
                self.connected.set()
                for _ in got.iter_raw():
                    pass
            self.ended_cleanly = True
        except BaseException as exc:
            self.error = exc
        finally:
            self.connected.set()


def test_sigterm_with_open_event_streams_exits_0_promptly(tmp_path: Path) -> None:
    """Three open /v1/events streams: SIGTERM ends them cleanly and the server exits 0 in 6 s."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    longcall.App(url).close()
    made = CliRunner().invoke(
        main, ["tokens", "create", "--admin", "-o", "json", "--database", url]
    )
    assert made.exit_code == 0, made.output
    token = json.loads(made.output)["token"]
    port = free_port()
    command = [str(Path(sys.executable).parent / "longcall"), "serve", "--database", url]
    proc = subprocess.Popen(
        [*command, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        streams = [Stream(f"{base}/v1/events", token) for _ in range(STREAMS)]
        threads = [threading.Thread(target=s.read, daemon=True) for s in streams]
        for thread in threads:
            thread.start()
        for stream in streams:
            assert stream.connected.wait(10), "a stream never connected"
            assert stream.status == 200, (stream.status, stream.error)
        time.sleep(0.5)  # the streams are inside their poll loops now
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert proc.wait(timeout=6) == 0
        took = time.monotonic() - signalled
        for thread in threads:
            thread.join(5)
        assert [s.error for s in streams] == [None] * STREAMS
        assert all(s.ended_cleanly for s in streams)
        # Well inside the five seconds after which uvicorn would cut the streams off instead.
        assert took < 4, took
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err, err
