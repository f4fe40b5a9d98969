"""A store in trouble: /readyz says so, and a shutdown does not wait out the retries.

On SQLite the trouble is real and easy to make: another connection holds the write lock,
so every write waits in the store's retry loop while reads still work (the schema check
passes, so only the recorded trouble can make /readyz fail). On PostgreSQL the test stops a
throwaway cluster of its own under ``longcall serve`` and sends SIGTERM while a request is
retrying.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import longcall
from longcall.cli.main import main
from longcall.core.clock import SystemClock
from longcall.store.sqlite import SqliteStore
from server.test_serve_cli import free_port, wait_until_healthy


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the SQLite file's write lock for the block."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def background(call: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread; its answer, or the exception it raised, lands in the list."""
    answers: list[Any] = []

    def run() -> None:
        try:
            answers.append(call())
        except Exception as exc:
            answers.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, answers


def test_readyz_reports_a_store_whose_writes_are_retrying(tmp_path: Path, live: Any) -> None:
    """Writes stuck behind a lock: /readyz 503 naming the trouble; ready again once it passes."""
    path = tmp_path / "locked.db"
    store = SqliteStore(path, SystemClock(), busy_timeout=0.05, retry_for=30)
    app = longcall.App(f"sqlite:///{path}", store=store)
    token = app.store.create_token(user_id="alice")[1]
    auth = {"authorization": f"Bearer {token}"}
    with live(app) as client:
        assert client.get("/readyz").status_code == 200
        with write_locked(path):
            thread, answers = background(
                lambda: client.post("/v1/jobs", json={"toolName": "t"}, headers=auth)
            )
            deadline = time.monotonic() + 10
            while (ready := client.get("/readyz")).status_code == 200:
                assert time.monotonic() < deadline, "readyz never saw the trouble"
                time.sleep(0.05)
            assert ready.status_code == 503
            reasons = ready.json()["reasons"]
            assert any("failing" in r and "locked" in r for r in reasons), reasons
            assert client.get("/healthz").status_code == 200  # alive, just not ready
        thread.join(10)
        assert answers[0].status_code == 201, answers[0].text
        assert client.get("/readyz").status_code == 200
    app.close()


def test_readyz_reports_a_store_error_that_is_not_retried(tmp_path: Path, live: Any) -> None:
    """A write failing for a reason of the store's own (a table gone): answered 503 at once,
    and /readyz says why until a write succeeds again; a refused value is no such trouble."""
    path = tmp_path / "broken.db"
    app = longcall.App(f"sqlite:///{path}")
    token = app.store.create_token(user_id="alice")[1]
    auth = {"authorization": f"Bearer {token}"}
    with live(app) as client:
        refused = client.post("/v1/jobs", json={"toolName": "t\u0000"}, headers=auth)
        assert refused.status_code == 400
        assert client.get("/readyz").status_code == 200  # the caller's mistake, not the store's
        conn = sqlite3.connect(path)
        conn.execute("ALTER TABLE lc_early_results RENAME TO lc_early_results_away")
        conn.commit()
        started = time.monotonic()
        broken = client.post("/v1/jobs", json={"toolName": "t"}, headers=auth)
        assert broken.status_code == 503 and time.monotonic() - started < 1.0
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert any("lc_early_results" in r for r in ready.json()["reasons"]), ready.text
        conn.execute("ALTER TABLE lc_early_results_away RENAME TO lc_early_results")
        conn.commit()
        conn.close()
        assert client.post("/v1/jobs", json={"toolName": "t"}, headers=auth).status_code == 201
        assert client.get("/readyz").status_code == 200
    app.close()


def test_a_shutdown_ends_requests_waiting_in_retries(tmp_path: Path, live: Any) -> None:
    """A write retrying behind a lock ends with 503 as soon as the server starts stopping."""
    path = tmp_path / "stop.db"
    store = SqliteStore(path, SystemClock(), busy_timeout=0.05, retry_for=60)
    app = longcall.App(f"sqlite:///{path}", store=store)
    token = app.store.create_token(user_id="alice")[1]
    auth = {"authorization": f"Bearer {token}"}
    with live(app) as client, write_locked(path):
        thread, answers = background(
            lambda: client.post("/v1/jobs", json={"toolName": "t"}, headers=auth)
        )
        while app.store.retries.trouble() is None:
            time.sleep(0.02)
        started = time.monotonic()
        app.store.retries.stop()  # what the server's shutdown does first
        thread.join(10)
        took = time.monotonic() - started
        assert answers[0].status_code == 503, answers[0].text
        assert "shutting down" in answers[0].json()["error"]["message"]
        assert took < 1.0, took
    app.close()


@pytest.mark.postgres
def test_sigterm_drains_promptly_with_a_request_stuck_in_retries(
    throwaway_pg: Any, tmp_path: Path
) -> None:
    """PostgreSQL gone, a write retrying: SIGTERM still exits 0 within the drain time.

    The drain is uvicorn's 5 s for requests in progress plus at most one attempt already
    under way (the pool's 5 s connect timeout): 12 s is the bound; before, the write held
    the process for its full minute of retries.
    """
    url = throwaway_pg.create_database("drain")
    longcall.App(url).close()
    made = CliRunner().invoke(
        main, ["tokens", "create", "--admin", "-o", "json", "--database", url]
    )
    assert made.exit_code == 0, made.output
    token = json.loads(made.output)["token"]
    port = free_port()
    command = [str(Path(sys.executable).parent / "longcall"), "serve", "--database", url]
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--no-worker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(longcall.__file__).parents[1])},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        auth = {"authorization": f"Bearer {token}"}
        assert (
            httpx.post(f"{base}/v1/jobs", json={"toolName": "t"}, headers=auth).status_code == 201
        )
        throwaway_pg.stop("immediate")
        thread, answers = background(
            lambda: httpx.post(f"{base}/v1/jobs", json={"toolName": "t"}, headers=auth, timeout=120)
        )
        time.sleep(1.0)  # the write is in its retries now
        ready = httpx.get(f"{base}/readyz", timeout=30)
        assert ready.status_code == 503, ready.text
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert proc.wait(timeout=30) == 0
        took = time.monotonic() - signalled
        thread.join(10)
        print(f"\nSIGTERM with a write stuck in retries: exited in {took:.1f} s")
        assert took < 12, took
        # The stuck write was answered 503 or cut off by the drain; never left hanging.
        assert not thread.is_alive() and answers
        if isinstance(answers[0], httpx.Response):
            assert answers[0].status_code == 503, answers[0].text
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
