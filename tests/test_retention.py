"""Retention: finished work goes once it is older than its period, in batches; what can still
change never goes. On SQLite and PostgreSQL, on a fake clock moved a month on."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import longcall
from longcall import FakeClock, Retention
from longcall.core.jobs import CallIds
from longcall.core.retention import MIN_WEBHOOK_WINDOW

DAY = 86400.0


@pytest.fixture
def app(db_url: str) -> Any:
    clock = FakeClock()
    opened = longcall.App(db_url, clock=clock)

    @opened.long_running(key="export:{name}", on_cancel=lambda job: None)
    def export(name: str) -> str:
        """Starts an export."""
        return "started"

    @opened.task()
    def double(n: int) -> int:
        return 2 * n

    @opened.workflow("twice")
    def twice(n: int) -> int:
        return double(double(n))

    yield opened
    opened.close()


def start(app: Any, name: str, *, session: str | None = None) -> str:
    """A started job of the export tool (whose on_cancel hook a cancel queues), joined to a
    session's call when ``session`` is given."""
    ids = CallIds("a", "u", session, f"call-{name}", "i") if session else None
    job, created = app.create_job("export", {"name": name}, job_id=name, ids=ids)
    assert created
    return str(job.job_id)


def job_ids(app: Any) -> set[str]:
    return {j.job_id for j in app.list_jobs(limit=1000)}


def test_finished_work_goes_after_its_period_and_what_can_change_stays(app: Any) -> None:
    clock: FakeClock = app.clock
    old_done = start(app, "old-done")
    app.complete(old_done, {"rows": 1})
    old_failed = start(app, "old-failed")
    app.fail(old_failed, "no")
    still_running = start(app, "still-running")
    undelivered = start(app, "undelivered", session="s1")
    app.complete(undelivered, {"rows": 2})  # ready: its session has not had it yet
    cancelled = start(app, "cancelled")
    app.cancel(cancelled)  # its on_cancel hook is still queued in the outbox
    run = app.run_workflow("twice", 3)
    assert run.status.value == "completed"
    app.ingest(source="batch", delivery_id="m1", job_id=old_done, kind="complete", payload=1)
    app.ingest(source="batch", delivery_id="m2", job_id="never-made", kind="complete")

    clock.advance(31 * DAY)
    recent = start(app, "recent")
    app.complete(recent, {"rows": 3})
    before = app.monitor.job_counts()

    assert app.prune(dry_run=True) == {"jobs": 2, "runs": 1, "inbox": 2, "early_results": 1}
    assert job_ids(app) >= {old_done, old_failed}  # a dry run removes nothing
    assert app.prune() == {"jobs": 2, "runs": 1, "inbox": 2, "early_results": 1}

    assert job_ids(app) == {still_running, undelivered, cancelled, recent}
    with pytest.raises(longcall.JobNotFound):
        app.get_job(old_done)
    assert app.job_events(old_done) == []  # its log went with it
    with pytest.raises(longcall.RunNotFound):
        app.get_run(run.run_id)
    assert app.monitor.job_counts() != before
    assert sum(app.monitor.job_counts().values()) == 4
    assert app.prune() == {"jobs": 0, "runs": 0, "inbox": 0, "early_results": 0}


def test_a_webhook_id_is_remembered_for_the_inbox_window(app: Any) -> None:
    """A sender's retry within the window is still a duplicate, after the job itself went."""
    job_id = start(app, "j")
    first = app.ingest(source="batch", delivery_id="m1", job_id=job_id, kind="complete")
    assert first.outcome == "applied"
    app.clock.advance(10 * DAY)
    retention = Retention.of(jobs="1d", runs="1d", webhooks="30d")
    assert app.prune(retention)["jobs"] == 1
    again = app.ingest(source="batch", delivery_id="m1", job_id=job_id, kind="complete")
    assert again.outcome == "duplicate"


def test_prune_goes_in_batches_and_forever_keeps_everything(app: Any) -> None:
    for n in range(7):
        job_id = start(app, f"j{n}")
        app.complete(job_id, n)
    app.clock.advance(40 * DAY)
    assert app.prune(Retention.forever()) == {}
    assert len(job_ids(app)) == 7
    assert app.store.prune("jobs", 30 * DAY, limit=3) == 3
    assert len(job_ids(app)) == 4
    pruner = longcall.retention.Pruner(app.runtime, Retention(), batch=2, pause=0)
    assert pruner.prune()["jobs"] == 4
    assert job_ids(app) == set()


def test_a_worker_prunes_as_it_runs(app: Any) -> None:
    job_id = start(app, "old")
    app.complete(job_id, 1)
    app.clock.advance(31 * DAY)

    async def main() -> None:
        worker = app.worker(retention=Retention.of(jobs="30d"))
        running = asyncio.create_task(worker.run(handle_signals=False))
        for _ in range(100):
            await asyncio.sleep(0.05)
            if not await app.list_jobs_async():
                break
        worker.stop()
        await running

    asyncio.run(main())
    assert job_ids(app) == set()


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"jobs": "soon"}, "jobs: not a duration"),
        ({"runs": 0}, "runs: a retention period must be longer than 0"),
        ({"webhooks": "2d"}, "the inbox is kept at least 7 days"),
    ],
)
def test_retention_periods_are_checked(given: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Retention.of(**given)


def test_retention_periods_read_as_written() -> None:
    assert Retention.of() == Retention()
    assert Retention.of(jobs="90d", runs="forever", webhooks=MIN_WEBHOOK_WINDOW) == Retention(
        90 * DAY, None, MIN_WEBHOOK_WINDOW
    )


def test_the_prune_command(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'lc.db'}"
    with longcall.App(db) as app:
        job, _ = app.create_job("render", job_id="r1")
        app.complete(job.job_id, 1)
    cli = [sys.executable, "-m", "longcall", "prune", "--database", db]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, env=env, timeout=60)

    dry = run("--older-than", "0s", "--dry-run")
    assert dry.returncode == 2 and "longer than 0" in dry.stderr
    dry = run("--older-than", "1ms", "--dry-run", "--only", "jobs")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == ["would remove 1 jobs"]
    done = run("--older-than", "1ms")
    assert done.returncode == 0, done.stderr
    assert "removed 1 jobs" in done.stdout.splitlines()
    with longcall.App(db) as app:
        assert app.list_jobs() == []
    bad = run("--older-than", "a while")
    assert bad.returncode == 2 and "--older-than" in bad.stderr
