"""`longcall serve` killed with SIGKILL while signed completions pour in, then restarted.

Every delivery answered 2xx before the kill must be in the store; the senders then retry
what was not answered (and some of what was, as a sender that lost the answer would), and
each job ends up succeeded exactly once, with its one delivery in the inbox.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import longcall
from longcall import JobState

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.webhooks import new_secret, sign
from server.test_serve_cli import free_port, wait_until_healthy

pytestmark = pytest.mark.slow

JOBS = 300
SENDERS = 16
KILL_AFTER = JOBS // 3  # 2xx answers seen before the SIGKILL


@dataclass(frozen=True)
class Delivery:
    job_id: str
    webhook_id: str
    body: bytes


def start_server(url: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "longcall"),
            "serve",
            "--database",
            url,
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc, base


def post(client: httpx.Client, base: str, secret: str, delivery: Delivery) -> str | None:
    """The outcome of one signed attempt, freshly timestamped; None when it got no 2xx."""
    headers = sign(delivery.body, secret, webhook_id=delivery.webhook_id)
    headers["content-type"] = "application/json"
    try:
        got = client.post(f"{base}/v1/hooks/batch", content=delivery.body, headers=headers)
    except httpx.TransportError:
        return None
    if not 200 <= got.status_code < 300:
        return None
    outcome: str = got.json()["outcome"]
    return outcome


def test_sigkill_mid_stream_loses_no_acknowledged_delivery_and_retries_apply_once(
    db_url: str,
) -> None:
    """Kill -9 while 16 senders post 300 completions; after a restart and retries, once each."""
    with longcall.App(db_url) as app:

        @app.long_running(key="job:{n}")
        def work(n: int) -> str:
            """Starts work number n."""
            return "started"

        job_ids = [work.invoke({"n": i})["jobId"] for i in range(JOBS)]
        secret = app.store.add_hook_secret("batch", new_secret()).secret
    deliveries = [
        Delivery(
            job_id,
            f"msg_kill_{i:04d}",
            json.dumps({"jobId": job_id, "type": "complete", "result": {"job": job_id}}).encode(),
        )
        for i, job_id in enumerate(job_ids)
    ]

    proc, base = start_server(db_url)
    acked: dict[str, str] = {}  # webhook id -> outcome of a 2xx answered before the kill
    lock = threading.Lock()

    def first_attempt(client: httpx.Client, delivery: Delivery) -> None:
        outcome = post(client, base, secret, delivery)
        if outcome is None:
            return
        with lock:
            acked[delivery.webhook_id] = outcome
            if len(acked) == KILL_AFTER:
                proc.send_signal(signal.SIGKILL)

    try:
        with (
            httpx.Client(timeout=10) as client,
            ThreadPoolExecutor(SENDERS) as pool,
        ):
            list(pool.map(lambda d: first_attempt(client, d), deliveries))
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert KILL_AFTER <= len(acked) < JOBS, "the kill did not land mid-stream"
    assert set(acked.values()) == {"applied"}

    by_id = {d.webhook_id: d for d in deliveries}
    with longcall.App(db_url) as app:
        for webhook_id in acked:
            job_id = by_id[webhook_id].job_id
            job = app.get_job(job_id)
            assert job.state is JobState.SUCCEEDED and job.result == {"job": job_id}
            assert [r["delivery_id"] for r in app.store.inbox(job_id)] == [webhook_id]

    # The senders retry every delivery without a 2xx, and one in three of those with one.
    unanswered = [d for d in deliveries if d.webhook_id not in acked]
    again = [d for d in deliveries if d.webhook_id in acked][::3]
    proc, base = start_server(db_url)
    try:
        with httpx.Client(timeout=10) as client, ThreadPoolExecutor(SENDERS) as pool:
            retried = dict(
                zip(
                    [d.webhook_id for d in unanswered + again],
                    pool.map(lambda d: post(client, base, secret, d), unanswered + again),
                    strict=True,
                )
            )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err, err
    assert all(retried[d.webhook_id] == "duplicate" for d in again)
    # Committed before the kill but never answered: the retry is a duplicate, and that is fine.
    late = Counter(retried[d.webhook_id] for d in unanswered)
    assert set(late) <= {"applied", "duplicate"}, late

    with longcall.App(db_url) as app:
        for delivery in deliveries:
            job = app.get_job(delivery.job_id)
            assert job.state is JobState.SUCCEEDED
            assert job.result == {"job": delivery.job_id}
            kinds = [e.kind for e in app.job_events(delivery.job_id)]
            assert kinds.count("succeeded") == 1, kinds
            inbox = app.store.inbox(delivery.job_id)
            assert [(r["delivery_id"], r["outcome"]) for r in inbox] == [
                (delivery.webhook_id, "applied")
            ]
