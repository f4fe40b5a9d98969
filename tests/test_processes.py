"""Several processes, crashes and a database restart: the exactly-once guarantees end to end.

Each resumer or worker runs in its own process (``tests/procs.py``) and logs what its agent
runs did; the store's session events are counted too. A job delivered twice shows up either
as a second ``delivered`` line (the agent stored the response again) or as two final
responses in the session; two runs on one session at once show up as a failed ``flock`` on
the session's lock file and as intersecting run intervals.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from longcall import App, Delivery, JobState
from pg_cluster import ThrowawayCluster
from procs import (
    LogFile,
    Proc,
    Recorder,
    build_app,
    final_responses,
    leftovers,
    log_kind,
    overlapping_runs,
    procs,
    read_log,
    seed,
    stats_of,
    tracebacks,
    wait_for,
)

pytestmark = pytest.mark.slow

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LEASE = 2.0  # seconds; the crash tests wait for it to run out


def all_delivered(app: App, count: int) -> bool:
    return app.store.counts() == {(JobState.SUCCEEDED.value, Delivery.DELIVERED.value): count}


def delivered_calls(lines: list[list[str]]) -> Counter[str]:
    return Counter(ln[3] for ln in log_kind(lines, "delivered"))


def assert_clean(started: list[Proc]) -> None:
    for proc in started:
        assert tracebacks(proc.stderr()) == [], proc.stderr()


# -- racing resumers ---------------------------------------------------------------------


async def _slow(session_id: str) -> None:
    await asyncio.sleep(0.01)


async def user_turns(app: App, runner: Recorder) -> None:
    """Thirty user turns, ten sessions at a time, each holding its session's lease."""
    for first in range(0, 30, 10):
        await asyncio.gather(
            *(
                app.run_turn_async(runner, user_id="u", session_id=f"s{s:03d}", text="hello")
                for s in range(first, first + 10)
            )
        )


@pytest.mark.parametrize("resumers", [2, 4])
def test_racing_resumers_deliver_every_job_once(db_url: str, tmp_path: Path, resumers: int) -> None:
    """Racing resumer processes deliver each job once; no two runs or turns share a session."""
    app, agent = build_app(db_url)
    try:
        job_ids = asyncio.run(seed(app, agent, sessions=30, turns=3))
        assert len(job_ids) == 270
        locks, go, stop = tmp_path / "locks", tmp_path / "go", tmp_path / "stop"
        locks.mkdir()
        logs = [tmp_path / f"resumer{i}.log" for i in range(resumers)]
        with procs([]) as started:
            for log in logs:
                started.append(
                    Proc(
                        db_url,
                        log,
                        "--locks", str(locks),
                        "--go-file", str(go),
                        "--stop-file", str(stop),
                        "--batch", "8",
                        "--poll", "0.05",
                        "--think", "0.005",
                    )
                )  # fmt: skip
            wait_for(
                lambda: len(log_kind(read_log(*logs), "ready")) == resumers, 60, "the resumers"
            )
            go.touch()
            # User turns from this process take the same sessions meanwhile.
            turns_log = LogFile(tmp_path / "turns.log")
            try:
                asyncio.run(
                    user_turns(app, Recorder(agent, turns_log, locks=locks, pause_before=_slow))
                )
            finally:
                turns_log.close()
            wait_for(lambda: all_delivered(app, len(job_ids)), 120, "every job to be delivered")
            stop.touch()
            codes = [proc.wait(30) for proc in started]
            assert codes == [0] * resumers, [p.stderr() for p in started]
            assert_clean(started)

        lines = read_log(*logs, tmp_path / "turns.log")
        assert len(log_kind(read_log(tmp_path / "turns.log"), "run")) == 30
        calls = {job.call_id for job in app.list_jobs(limit=1000)}
        assert len(calls) == len(job_ids)
        # One attempt per job: no job was claimed by two resumers.
        attempts = Counter(ln[3] for ln in log_kind(lines, "attempt"))
        assert set(attempts) == calls
        assert max(attempts.values()) == 1
        # One delivery per job, in the logs and in the sessions.
        assert delivered_calls(lines) == Counter(dict.fromkeys(calls, 1))
        assert final_responses(app) == Counter(dict.fromkeys(calls, 1))
        # Never two runs on one session at a time.
        assert log_kind(lines, "overlap") == []
        assert overlapping_runs(lines) == []
        stats = stats_of(lines)
        assert len(stats) == resumers
        total = sum(stats.values(), Counter())
        assert total["delivered"] == len(job_ids)
        # No run failed (a message mixing invocations would) and none was orphaned.
        assert total["delivery_retried"] == total["orphaned"] == total["claim_lost"] == 0
        # It was a race: more than one process delivered.
        assert len({ln[1] for ln in log_kind(lines, "delivered")}) >= 2
        assert leftovers(db_url) == ([], [])
    finally:
        app.close()


# -- a worker killed in the middle of a delivery -----------------------------------------


def _one_ready_job(url: str) -> tuple[App, str]:
    app, agent = build_app(url)
    (job_id,) = asyncio.run(seed(app, agent, sessions=1, turns=1, text="one report"))
    return app, job_id


def _worker(url: str, log: Path, *extra: str) -> Proc:
    return Proc(url, log, "--mode", "worker", "--lease", str(LEASE), "--poll", "0.1", *extra)


@pytest.mark.parametrize("pause_at", ["before", "after"])
def test_killed_worker_job_is_delivered_once_by_the_next(
    db_url: str, tmp_path: Path, pause_at: str
) -> None:
    """A worker SIGKILLed mid-delivery: a worker started later delivers once the lease is out."""
    # "before": killed before the agent stored the response; the next worker delivers it.
    # "after": killed after the agent stored it; the next worker finds it in the session.
    app, job_id = _one_ready_job(db_url)
    try:
        call_id = app.get_job(job_id).call_id
        log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
        paused, stop = tmp_path / "paused", tmp_path / "stop"
        with procs([]) as started:
            a = _worker(db_url, log_a, "--pause-at", pause_at, "--signal-file", str(paused))
            started.append(a)
            wait_for(paused.exists, 60, "the first worker to start delivering")
            killed_at = time.time()
            a.signal(signal.SIGKILL)
            assert a.wait(10) == -signal.SIGKILL
            assert app.get_job(job_id).delivery is Delivery.READY
            b = _worker(db_url, log_b, "--stop-file", str(stop))
            started.append(b)
            wait_for(
                lambda: app.get_job(job_id).delivery is Delivery.DELIVERED, 60, "the second worker"
            )
            stop.touch()
            assert b.wait(30) == 0, b.stderr()
            assert_clean([b])

        job = app.get_job(job_id)
        assert job.delivered_at is not None
        # The dead holder renewed its lease at most LEASE/3 before dying.
        assert job.delivered_at - killed_at >= LEASE * 2 / 3 - 0.2
        lines_a, lines_b = read_log(log_a), read_log(log_b)
        assert len(log_kind(lines_a, "attempt")) == 1
        assert final_responses(app) == Counter({call_id: 1})
        assert delivered_calls(lines_a + lines_b) == Counter({call_id: 1})
        (stats_b,) = stats_of(lines_b).values()
        if pause_at == "before":
            assert delivered_calls(lines_b) == Counter({call_id: 1})
            assert stats_b["delivered"] == 1
        else:
            assert delivered_calls(lines_a) == Counter({call_id: 1})
            assert log_kind(lines_b, "attempt") == []
            assert stats_b["already_in_session"] == 1
            assert stats_b["delivered"] == 0
        assert leftovers(db_url) == ([], [])
    finally:
        app.close()


def test_live_worker_keeps_its_claim_past_the_lease(db_url: str, tmp_path: Path) -> None:
    """A slow but live worker renews its lease: another worker waits, then takes over on a kill."""
    app, job_id = _one_ready_job(db_url)
    try:
        log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
        paused, stop = tmp_path / "paused", tmp_path / "stop"
        with procs([]) as started:
            a = _worker(db_url, log_a, "--pause-at", "before", "--signal-file", str(paused))
            started.append(a)
            wait_for(paused.exists, 60, "the first worker to start delivering")
            b = _worker(db_url, log_b, "--stop-file", str(stop))
            started.append(b)
            wait_for(lambda: log_kind(read_log(log_b), "ready") != [], 60, "the second worker")
            time.sleep(3 * LEASE)
            assert log_kind(read_log(log_b), "attempt") == []
            job = app.get_job(job_id)
            assert job.delivery is Delivery.READY
            assert job.claim_holder is not None and f":{a.pid}:" in job.claim_holder
            a.signal(signal.SIGKILL)
            assert a.wait(10) == -signal.SIGKILL
            wait_for(lambda: app.get_job(job_id).delivery is Delivery.DELIVERED, 60, "the takeover")
            stop.touch()
            assert b.wait(30) == 0, b.stderr()
        lines = read_log(log_a, log_b)
        assert delivered_calls(lines) == Counter({app.get_job(job_id).call_id: 1})
        assert len(log_kind(lines, "attempt")) == 2
        assert log_kind(lines, "overlap") == []
    finally:
        app.close()


# -- PostgreSQL restarted under the resumers ---------------------------------------------


@pytest.mark.postgres
def test_postgres_restart_mid_claims_loses_nothing(
    throwaway_pg: ThrowawayCluster, tmp_path: Path
) -> None:
    """An immediate PostgreSQL restart mid-claims: resumers retry, every job delivered once.

    The server that crashes is the test's own cluster, never the machine's."""
    pg_url = throwaway_pg.create_database("restarted")
    app, agent = build_app(pg_url)
    try:
        job_ids = asyncio.run(seed(app, agent, sessions=32, turns=3))
        total = len(job_ids)
        locks, go, stop = tmp_path / "locks", tmp_path / "go", tmp_path / "stop"
        locks.mkdir()
        logs = [tmp_path / f"resumer{i}.log" for i in range(4)]
        with procs([]) as started:
            for log in logs:
                started.append(
                    Proc(
                        pg_url,
                        log,
                        "--locks", str(locks),
                        "--go-file", str(go),
                        "--stop-file", str(stop),
                        "--batch", "4",
                        "--poll", "0.05",
                        "--think", "0.05",
                        "--lease", "10",
                    )
                )  # fmt: skip
            wait_for(lambda: len(log_kind(read_log(*logs), "ready")) == 4, 60, "the resumers")
            go.touch()
            wait_for(
                lambda: len(log_kind(read_log(*logs), "delivered")) >= total // 8,
                60,
                "the first deliveries",
                step=0.01,
            )
            throwaway_pg.stop("immediate")
            delivered_at_stop = len(log_kind(read_log(*logs), "delivered"))
            time.sleep(1.0)
            throwaway_pg.start()
            assert delivered_at_stop < total, "the restart came too late to hit any claim"
            wait_for(lambda: all_delivered(app, total), 150, "every job to be delivered")
            stop.touch()
            codes = [proc.wait(30) for proc in started]
            assert codes == [0, 0, 0, 0], [p.stderr() for p in started]
            assert_clean(started)
            retried = sum(p.stderr().count("PostgreSQL error, retrying") for p in started)

        assert retried > 0, "no resumer noticed the restart"
        lines = read_log(*logs)
        calls = {job.call_id for job in app.list_jobs(limit=1000)}
        assert len(calls) == total
        # A commit whose answer the crash swallowed is retried, finds the response already
        # stored and skips it, so the agent's own log may miss a delivery; it never shows two.
        # The store is the record: exactly one closing response per call.
        assert set(delivered_calls(lines).values()) <= {1}
        assert final_responses(app) == Counter(dict.fromkeys(calls, 1))
        assert log_kind(lines, "overlap") == []
        assert overlapping_runs(lines) == []
        assert leftovers(pg_url) == ([], [])
    finally:
        app.close()
