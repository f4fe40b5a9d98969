"""A workflow process killed with SIGKILL mid-task, continued by another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from longcall import App, RunStatus
from longcall.errors import RunStateError

from .wf_procs import read_effects

SCRIPT = Path(__file__).resolve().with_name("wf_procs.py")


def spawn(url: str, tmp_path: Path, mode: str, *extra: str) -> subprocess.Popen[bytes]:
    effects = tmp_path / "effects.log"
    out = (tmp_path / f"{mode}.out").open("wb")
    err = (tmp_path / f"{mode}.err").open("wb")
    try:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), mode, "--url", url, "--effects", str(effects), *extra],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        out.close()
        err.close()


def reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)


@pytest.mark.slow
def test_sigkill_in_task_3_of_5_then_continue_elsewhere_skips_tasks_1_and_2(
    db_url: str, tmp_path: Path
) -> None:
    """After SIGKILL in task 3, another process reruns only task 3 onwards; the run ends once."""
    run_id = "run-crash"
    marker = tmp_path / "blocked"
    effects = tmp_path / "effects.log"
    first = spawn(
        db_url, tmp_path, "start", "--run-id", run_id, "--block-at", "3", "--marker", str(marker)
    )
    second: subprocess.Popen[bytes] | None = None
    try:
        give_up = time.monotonic() + 60
        while not marker.exists():
            assert first.poll() is None, (tmp_path / "start.err").read_text()
            assert time.monotonic() < give_up, "the first process never reached task 3"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        assert [task for task, _ in read_effects(effects)] == ["step1", "step2", "step3"]

        with App(db_url) as app:
            before = app.get_run(run_id)
            assert before.status is RunStatus.RUNNING
            assert [s.name for s in before.steps] == ["step1", "step2"]

        second = spawn(db_url, tmp_path, "continue", "--run-id", run_id)
        assert second.wait(60) == 0, (tmp_path / "continue.err").read_text()
        printed = json.loads((tmp_path / "continue.out").read_text())
    finally:
        reap(first)
        if second is not None:
            reap(second)

    assert printed == {
        "status": "completed",
        "result": {"order_id": "A-1", "total": 151},
        "error": None,
    }
    lines = read_effects(effects)
    assert Counter(task for task, _ in lines) == {
        "step1": 1,
        "step2": 1,
        "step3": 2,
        "step4": 1,
        "step5": 1,
    }
    by_pid = {pid for _, pid in lines}
    assert by_pid == {first.pid, second.pid}
    assert [(task, pid == second.pid) for task, pid in lines] == [
        ("step1", False),
        ("step2", False),
        ("step3", False),
        ("step3", True),
        ("step4", True),
        ("step5", True),
    ]

    with App(db_url) as app:
        details = app.get_run(run_id)
        assert details.status is RunStatus.COMPLETED
        assert details.run.result == {"order_id": "A-1", "total": 151}
        assert details.run.error is None
        assert [(s.position, s.name, s.ok, s.result, s.attempts) for s in details.steps] == [
            (1, "step1", True, 11, 1),
            (2, "step2", True, 31, 1),
            (3, "step3", True, 61, 1),
            (4, "step4", True, 101, 1),
            (5, "step5", True, 151, 1),
        ]
        # Completed once: nothing is left to continue.
        with pytest.raises(RunStateError):
            app.continue_run(run_id)
    assert len(read_effects(effects)) == 6
