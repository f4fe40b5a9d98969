"""GET /metrics: Prometheus text with job counts, webhook outcomes, deliveries, runs, tasks and
cron; and a worker's own metrics port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from longcall.webhooks import new_secret, sign
from sample_agent import ask_for_export


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_jobs_webhooks_and_deliveries(db_url: str, live: Any) -> None:
    app = longcall.App(db_url)
    agent = ask_for_export(app, user_id="alice", session_id="s1")
    secret = app.store.add_hook_secret("batch", new_secret()).secret
    job_id = longcall.job_id_for("export:csv", "alice")
    body = json.dumps({"jobId": job_id, "type": "complete", "result": {"rows": 1}}).encode()
    with live(app) as client:
        headers = {**sign(body, secret, webhook_id="msg-1"), "content-type": "application/json"}
        for _ in range(2):  # the second is a duplicate
            assert client.post("/v1/hooks/batch", content=body, headers=headers).is_success
        forged = {**sign(body, new_secret()), "content-type": "application/json"}
        assert client.post("/v1/hooks/batch", content=body, headers=forged).status_code == 401
        anywhere = client.post("/v1/hooks/x-random", content=body, headers=forged)
        assert anywhere.status_code == 401
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        got = client.get("/metrics")
    app.close()
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/plain")
    values = samples(got.text)
    jobs = (("delivery", "delivered"), ("state", "succeeded"))
    assert values[("longcall_jobs", jobs)] == 1
    webhook = "longcall_webhook_deliveries_total"
    assert values[(webhook, (("outcome", "applied"), ("source", "batch")))] == 1
    assert values[(webhook, (("outcome", "duplicate"), ("source", "batch")))] == 1
    assert values[(webhook, (("outcome", "refused_401"), ("source", "batch")))] == 1
    # A source nobody configured is not a label: posting to random paths cannot grow the set.
    assert values[(webhook, (("outcome", "refused_401"), ("source", "(unknown)")))] == 1
    assert values[("longcall_deliveries_total", (("outcome", "delivered"),))] == 1
    assert values[("longcall_delivery_latency_seconds_count", ())] == 1


def test_metrics_show_runs_tasks_and_cron(db_url: str) -> None:
    """The runs not finished by status and the oldest queued one's wait (from the store),
    runs ended and task durations (this process's), cron occurrences fired and misfired."""
    from longcall.server.metrics import Metrics

    clock = longcall.FakeClock()
    app = longcall.App(db_url, clock=clock)

    @app.task(name="double")
    def double(n: int) -> int:
        return 2 * n

    @app.task(name="refuse")
    def refuse(n: int) -> int:
        raise ValueError("no")

    @app.workflow("twice")
    def twice(n: int) -> int:
        return double(double(n))

    @app.workflow("refusing")
    def refusing(n: int) -> int:
        return refuse(n)

    metrics = Metrics(app)
    try:
        app.run_workflow("twice", 3)
        app.run_workflow("refusing", 1)
        app.submit_run("twice", 1)
        clock.advance(90)
        app.submit_run("twice", 2)
        app.crons.create("every-minute", "twice", "* * * * *", input=1)
        clock.advance(61)
        scheduler = app.crons.scheduler()
        assert len(scheduler.tick()) == 1
        clock.advance(3600)  # an hour without a tick: past the misfire grace
        scheduler.tick()
        values = samples(generate_latest(metrics.registry).decode())
    finally:
        app.close()
    assert values[("longcall_runs", (("status", "queued"),))] == 3  # two submitted, one fired
    assert values[("longcall_runs", (("status", "running"),))] == 0
    assert values[("longcall_run_queue_oldest_age_seconds", ())] >= 90 + 61 + 3600
    ended = "longcall_runs_ended_total"
    assert values[(ended, (("status", "completed"), ("workflow", "twice")))] == 1
    assert values[(ended, (("status", "failed"), ("workflow", "refusing")))] == 1
    tasks = "longcall_task_duration_seconds_count"
    assert values[(tasks, (("outcome", "ok"), ("task", "double"), ("workflow", "twice")))] == 2
    assert values[(tasks, (("outcome", "error"), ("task", "refuse"), ("workflow", "refusing")))]
    assert values[("longcall_cron_fires_total", (("outcome", "fired"),))] >= 1
    assert values[("longcall_cron_misfires_total", (("policy", "skip"),))] == 1


def test_a_worker_serves_its_metrics_without_a_server(tmp_path: Path) -> None:
    """``longcall worker --metrics-port`` answers a scrape with the worker's metrics."""
    (tmp_path / "flows.py").write_text(
        "import longcall\n"
        f"app = longcall.App('sqlite:///{tmp_path / 'lc.db'}')\n"
        "@app.workflow('noop')\n"
        "def noop(n: int) -> int:\n"
        "    return n\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    command = [sys.executable, "-m", "longcall", "worker", "--app", "flows:app"]
    worker = subprocess.Popen(
        [*command, "--metrics-port", str(port)],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as got:
                    text = got.read().decode()
                break
            except OSError:
                assert worker.poll() is None, worker.communicate()[1]
                assert time.monotonic() < deadline, "the worker never served its metrics"
                time.sleep(0.2)
        values = samples(text)
        assert values[("longcall_runs", (("status", "queued"),))] == 0
        assert ("longcall_run_queue_oldest_age_seconds", ()) in values
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 0, errors
    bad = subprocess.run(
        [*command, "--metrics-port", "0"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--metrics-port" in bad.stderr
