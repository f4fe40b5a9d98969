"""GET /metrics: Prometheus text with job counts, webhook outcomes and deliveries."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")
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
