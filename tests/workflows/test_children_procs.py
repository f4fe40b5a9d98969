"""Child workflows across worker processes killed with SIGKILL, on SQLite and PostgreSQL: a
parent killed between creating its child and recording it, and a worker killed while the
child works and the parent waits, each end with exactly one child and the parent's result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from longcall import App, RunStatus
from procs import sql_rows

from .child_procs import build_app, read_effects

SCRIPT = Path(__file__).resolve().with_name("child_procs.py")


def spawn(url: str, tmp_path: Path, name: str, *extra: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                "--url",
                url,
                "--effects",
                str(tmp_path / "fx.log"),
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def wait_for(app: App, run_id: str, status: RunStatus, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        run = app.store.get_run(run_id)
        if run.status is status:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.02)


def child_rows(url: str, parent: str) -> list[tuple[Any, ...]]:
    return sql_rows(url, f"SELECT run_id FROM lc_runs WHERE parent_run_id = '{parent}'")


@pytest.mark.slow
def test_a_parent_killed_between_creating_its_child_and_recording_it_starts_one(
    db_url: str, tmp_path: Path
) -> None:
    """Worker A dies (SIGKILL) right after the child's row is committed, before the parent's
    checkpoint says so; worker B replays the parent and finds the same child: one child, run
    once, its result in the parent."""
    effects = tmp_path / "fx.log"
    with build_app(db_url, effects) as app:
        run = app.submit_run("mom", 0.0)
        first = spawn(db_url, tmp_path, "a", "--crash")
        try:
            assert first.wait(60) == -signal.SIGKILL
        finally:
            kill(first)
        [(child,)] = child_rows(db_url, run.run_id)
        assert app.store.run_steps(run.run_id) == []  # the start was never recorded
        second = spawn(db_url, tmp_path, "b")
        try:
            done = wait_for(app, run.run_id, RunStatus.COMPLETED)
        finally:
            kill(second)
        assert child_rows(db_url, run.run_id) == [(child,)]
    assert done.result == {"child": child, "pid": second.pid}
    assert [(what, pid) for what, pid, _ in read_effects(effects)] == [("kid", second.pid)]


@pytest.mark.slow
def test_a_worker_killed_while_the_child_works_leaves_one_child(
    db_url: str, tmp_path: Path
) -> None:
    """Worker A starts the child and is SIGKILLed in the child's task while the parent
    sleeps on it; worker B takes the child over, its end wakes the parent, and B finishes
    the parent: still one child."""
    effects = tmp_path / "fx.log"
    with build_app(db_url, effects) as app:
        run = app.submit_run("mom", 3.0)
        first = spawn(db_url, tmp_path, "a")
        try:
            deadline = time.monotonic() + 60
            while not read_effects(effects):
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.02)
            wait_for(app, run.run_id, RunStatus.SLEEPING)
        finally:
            kill(first)
        second = spawn(db_url, tmp_path, "b")
        try:
            done = wait_for(app, run.run_id, RunStatus.COMPLETED)
        finally:
            kill(second)
        [(child,)] = child_rows(db_url, run.run_id)
    assert done.result == {"child": child, "pid": second.pid}
    # The child's first task was checkpointed by A; only its task in flight ran again, in B.
    assert [(what, pid) for what, pid, _ in read_effects(effects)] == [("kid", first.pid)]


@pytest.mark.slow
def test_cancelling_the_parent_from_another_process_stops_its_running_child(
    db_url: str, tmp_path: Path
) -> None:
    """The parent sleeps on its child, which works in a worker process; this process cancels
    the parent: both end cancelled, the child at its next task call, long before its work
    would have finished (600 ticks of 50 ms)."""
    effects = tmp_path / "fx.log"
    with build_app(db_url, effects) as app:
        run = app.submit_run("boss", 600)
        worker = spawn(db_url, tmp_path, "w")
        try:
            deadline = time.monotonic() + 60
            while not read_effects(effects):
                assert time.monotonic() < deadline and worker.poll() is None
                time.sleep(0.02)
            [(child,)] = child_rows(db_url, run.run_id)
            while not any(s.name.endswith("work") for s in app.store.run_steps(child)):
                assert time.monotonic() < deadline and worker.poll() is None
                time.sleep(0.02)
            asked = time.monotonic()
            assert app.cancel_run(run.run_id).status is RunStatus.CANCELLED
            stopped = wait_for(app, child, RunStatus.CANCELLED, seconds=30)
            took = time.monotonic() - asked
        finally:
            kill(worker)
        ticks = [s for s in app.store.run_steps(child) if s.name.endswith("work")]
    assert stopped.error["type"] == "Cancelled"
    assert took < 20 and 0 < len(ticks) < 600, (took, len(ticks))
