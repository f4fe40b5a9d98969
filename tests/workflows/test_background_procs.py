"""Background runs on worker processes: SIGKILL mid-run, cancels from another process, races.

The workers are ``tests/workflows/bg_procs.py`` processes (a RunWorker each); the test process
submits, cancels and reads runs through an App of its own on the same database.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from longcall import RunStatus

from .bg_procs import build_app, read_effects, sql_rows

SCRIPT = Path(__file__).resolve().with_name("bg_procs.py")
CANCELLED = {"type": "Cancelled", "message": "the run was cancelled", "attempt": 1}


class Proc:
    """One worker process, with its own effects file and captured output."""

    def __init__(self, url: str, directory: Path, name: str, *options: str) -> None:
        self.name = name
        self.effects = directory / f"{name}.effects"
        self.out = directory / f"{name}.out"
        self.err = directory / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    str(SCRIPT),
                    "--url",
                    url,
                    "--effects",
                    str(self.effects),
                    *options,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.pid = self.popen.pid

    def kill(self) -> None:
        """SIGKILL, and wait until the process is gone."""
        self.popen.send_signal(signal.SIGKILL)
        assert self.popen.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        """SIGTERM: the worker finishes the runs in hand and exits 0, without a traceback."""
        self.popen.send_signal(signal.SIGTERM)
        code = self.popen.wait(30)
        stderr = self.err.read_text()
        assert code == 0, stderr
        assert "Traceback" not in stderr, stderr

    def alive(self) -> bool:
        return self.popen.poll() is None

    def reap(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)


@contextmanager
def procs() -> Iterator[list[Proc]]:
    """A list to start processes into; whatever is still running at the end is killed."""
    started: list[Proc] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.reap()


def wait_for(
    check: Callable[[], bool], seconds: float, what: str, *workers: Proc, every: float = 0.05
) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` (and a worker that died) if not."""
    give_up = time.monotonic() + seconds
    while not check():
        for worker in workers:
            assert worker.alive(), f"{worker.name} died: {worker.err.read_text()}"
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(every)


def statuses(url: str) -> Counter[str]:
    return Counter({status: n for status, n in sql_rows(url, _STATUS_COUNTS)})


_STATUS_COUNTS = "SELECT status, COUNT(*) FROM lc_runs GROUP BY status"


def held_by(url: str, pid: int) -> set[str]:
    """The runs a (dead) process's workers still hold: its holder names carry its pid."""
    rows = sql_rows(
        url, f"SELECT run_id FROM lc_runs WHERE status = 'running' AND holder LIKE '%:{pid}:%'"
    )
    return {r[0] for r in rows}


def task_number(task: str) -> int:
    match = re.fullmatch(r"(?:t|tick)(\d+)", task)
    assert match, task
    return int(match.group(1))


# -- SIGKILL ------------------------------------------------------------------------------


RUNS = 500


@pytest.mark.slow
def test_four_workers_two_sigkilled_finish_every_run_once_from_its_checkpoints(
    db_url: str, tmp_path: Path
) -> None:
    """500 runs on 4 workers, 2 SIGKILLed mid-run: each run completes once with the right
    result, and only a task in flight in a killed process runs a second time."""
    app = build_app(db_url)
    killed: dict[int, set[str]] = {}  # pid -> the runs it held when it died
    try:
        for n in range(RUNS):
            run = app.submit_run("triple", n, run_id=f"run-{n:03d}")
            assert run.created and run.status is RunStatus.QUEUED
        with procs() as workers:
            # Slow enough that runs are left to hold at the second kill: the first victim's
            # runs wait out their 2 s lease before it, and the other workers keep draining.
            options = ("--concurrency", "4", "--task-sleep", "0.05")
            workers += [Proc(db_url, tmp_path, f"w{i}", *options) for i in range(4)]
            for victim, after in ((workers[0], 100), (workers[1], 250)):
                wait_for(
                    lambda after=after: statuses(db_url)["completed"] >= after,
                    60,
                    f"{after} completed runs",
                    *workers[1:],
                )
                # Its runs move in step (claimed together, ended together): kill it with some
                # in hand, not in the gap between two batches.
                wait_for(lambda v=victim: bool(held_by(db_url, v.pid)), 30, "runs in hand")
                victim.kill()
                # A statement the victim sent just before it died still commits on
                # PostgreSQL (its server process notices the lost client only afterwards):
                # an end claiming the next run would add to what it holds.
                time.sleep(0.3)
                held = held_by(db_url, victim.pid)
                assert held, f"{victim.name} held no run when it was killed"
                killed[victim.pid] = held
                if victim is workers[1]:
                    workers.append(Proc(db_url, tmp_path, "w4", *options))
                # Taken over once the dead holder's lease has run out, before the next kill,
                # so no run is held by two processes that die.
                wait_for(
                    lambda held=held: (
                        {r.status for r in map(app.store.get_run, held)} == {RunStatus.COMPLETED}
                    ),
                    30,
                    f"the runs {victim.name} held to be taken over",
                    *workers[2:],
                )
            wait_for(lambda: statuses(db_url)["completed"] == RUNS, 60, "every run", *workers[2:])
            for worker in workers[2:]:
                worker.stop()
        effects = read_effects(*(w.effects for w in workers))
        pids = {w.pid for w in workers}

        assert statuses(db_url) == {"completed": RUNS}
        held_at_death = {run_id: pid for pid, held in killed.items() for run_id in held}
        lines: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for run_id, task, pid in effects:
            assert pid in pids
            lines[run_id].append((task_number(task), pid))
        assert set(lines) == {f"run-{n:03d}" for n in range(RUNS)}
        again = 0
        for n in range(RUNS):
            run_id = f"run-{n:03d}"
            details = app.get_run(run_id)
            run = details.run
            assert run.status is RunStatus.COMPLETED, run_id
            assert run.result == n * 1000 + 123, run_id
            assert (run.error, run.errors, run.attempts) == (None, [], 0), run_id
            assert [(s.position, s.name, s.ok, s.attempts) for s in details.steps] == [
                (1, "t1", True, 1),
                (2, "t2", True, 1),
                (3, "t3", True, 1),
            ], run_id
            counts = Counter(task for task, _ in lines[run_id])
            assert set(counts) == {1, 2, 3}, (run_id, lines[run_id])
            twice = [task for task, c in counts.items() if c > 1]
            assert all(c <= 2 for c in counts.values()), (run_id, lines[run_id])
            if run_id not in held_at_death:
                assert twice == [], (run_id, lines[run_id])
                assert run.executions == 1, run_id
                assert len({pid for _, pid in lines[run_id]}) == 1, (run_id, lines[run_id])
                continue
            # Held by a process that died: it ran a prefix of the tasks, the taker-over ran
            # the rest, starting again only at the task that was in flight (not recorded).
            dead = held_at_death[run_id]
            assert run.executions == 2, run_id
            before = sorted(task for task, pid in lines[run_id] if pid == dead)
            after = sorted(task for task, pid in lines[run_id] if pid != dead)
            assert len({pid for _, pid in lines[run_id] if pid != dead}) <= 1, lines[run_id]
            assert before == list(range(1, len(before) + 1)), (run_id, lines[run_id])
            if after:
                assert after == list(range(after[0], 4)), (run_id, lines[run_id])
                assert after[0] in (len(before), len(before) + 1), (run_id, lines[run_id])
            else:  # it died after its last checkpoint: the taker-over only ended the run
                assert before == [1, 2, 3], (run_id, lines[run_id])
            assert len(twice) <= 1, (run_id, lines[run_id])
            if twice:
                assert twice == [before[-1]] == [after[0]], (run_id, lines[run_id])
                again += 1
        assert 1 <= again <= sum(len(held) for held in killed.values())
        assert len(effects) == 3 * RUNS + again
        (total,) = sql_rows(db_url, "SELECT COUNT(*) FROM lc_run_steps")
        assert total == (3 * RUNS,)
    finally:
        app.close()


# -- cancelling a run on another process -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("workflow", ["ticker_async", "ticker_sync"])
def test_cancel_reaches_a_run_on_another_process_at_its_next_task_call(
    db_url: str, tmp_path: Path, workflow: str
) -> None:
    """A cancel from this process stops a run another process executes: the workflow sees
    ``ctx.cancelled``, calls no further task, and the run ends cancelled within seconds."""
    app = build_app(db_url)
    try:
        with procs() as workers:
            # A grace far longer than the test: only the run's own next task call can end it.
            worker = Proc(db_url, tmp_path, "w", "--grace", "120s")
            workers.append(worker)
            run = app.submit_run(workflow, 100)
            wait_for(lambda: len(app.get_run(run.run_id).steps) >= 2, 30, "two ticks", worker)
            asked = time.monotonic()
            flagged = app.cancel_run(run.run_id)
            assert flagged.status is RunStatus.RUNNING
            assert flagged.cancel_requested
            wait_for(
                lambda: app.get_run(run.run_id).status is RunStatus.CANCELLED,
                5,
                "the run to end cancelled",
                worker,
            )
            took = time.monotonic() - asked

            # The worker goes on with other runs.
            after = app.submit_run("triple", 7)
            wait_for(
                lambda: app.get_run(after.run_id).status is RunStatus.COMPLETED, 30, "a new run"
            )
            worker.stop()

        details = app.get_run(run.run_id)
        assert took < 3
        assert details.run.error == CANCELLED
        assert details.run.errors == [CANCELLED]
        assert details.run.result is None
        assert details.run.finished_at is not None
        seen = [e.data for e in details.events if e.kind == "cancel-seen"]
        assert len(seen) == 1, details.events
        stopped_at = seen[0]["at"]
        # Every tick before the one it noticed the cancel at ran and was recorded; none after.
        assert [s.name for s in details.steps] == ["tick_" + workflow.split("_")[1]] * stopped_at
        ticks = [task for run_id, task, _ in read_effects(worker.effects) if run_id == run.run_id]
        assert ticks == [f"tick{i}" for i in range(stopped_at)]
        assert app.get_run(after.run_id).run.result == 7123
    finally:
        app.close()


@pytest.mark.slow
def test_cancel_of_a_run_whose_worker_died_ends_it_when_another_takes_it_over(
    db_url: str, tmp_path: Path
) -> None:
    """A run whose worker was SIGKILLed is cancelled: once the lease runs out, the worker
    that takes it over ends it cancelled without running another task."""
    app = build_app(db_url)
    try:
        with procs() as workers:
            first = Proc(db_url, tmp_path, "first", "--grace", "120s")
            workers.append(first)
            run = app.submit_run("ticker_sync", 100)
            wait_for(lambda: len(app.get_run(run.run_id).steps) >= 2, 30, "two ticks", first)
            first.kill()
            recorded = app.get_run(run.run_id).steps
            flagged = app.cancel_run(run.run_id)
            assert flagged.status is RunStatus.RUNNING
            assert flagged.cancel_requested
            second = Proc(db_url, tmp_path, "second", "--grace", "120s")
            workers.append(second)
            wait_for(
                lambda: app.get_run(run.run_id).status is RunStatus.CANCELLED,
                15,
                "the run to end cancelled",
                second,
            )
            second.stop()
        details = app.get_run(run.run_id)
        assert details.steps == recorded
        assert details.run.error == CANCELLED
        assert details.run.executions == 2
        assert read_effects(second.effects) == []
    finally:
        app.close()


@pytest.mark.slow
def test_cancel_of_an_async_run_stuck_in_a_task_ends_it_after_the_grace(
    db_url: str, tmp_path: Path
) -> None:
    """A run in a task that never returns sees ``ctx.cancelled`` through its lease renewal,
    and the worker cancels it outright once the grace (1 s) is over."""
    app = build_app(db_url)
    try:
        with procs() as workers:
            worker = Proc(db_url, tmp_path, "w", "--grace", "1s")
            workers.append(worker)
            run = app.submit_run("sleeper_async", 60)
            wait_for(
                lambda: any(r == run.run_id for r, _, _ in read_effects(worker.effects)),
                30,
                "the task to start",
                worker,
            )
            asked = time.monotonic()
            assert app.cancel_run(run.run_id).cancel_requested
            wait_for(
                lambda: app.get_run(run.run_id).status is RunStatus.CANCELLED,
                8,
                "the run to end cancelled",
                worker,
            )
            took = time.monotonic() - asked
            worker.stop()
        details = app.get_run(run.run_id)
        assert 1 <= took < 5
        assert [e.kind for e in details.events] == ["task-saw-cancel"]
        assert details.steps == []
        assert details.run.error == CANCELLED
        assert details.run.result is None
    finally:
        app.close()


@pytest.mark.slow
def test_cancels_racing_completions_end_each_run_once_either_way(
    db_url: str, tmp_path: Path
) -> None:
    """Runs cancelled at random moments on two workers: each ends completed with all its
    steps, or cancelled, and a cancelled run stays cancelled."""
    rng = random.Random(20240611)
    app = build_app(db_url)
    total = 120
    try:
        with procs() as workers:
            options = ("--concurrency", "4", "--task-sleep", "0.1", "--grace", "5s")
            workers += [Proc(db_url, tmp_path, f"w{i}", *options) for i in range(2)]
            ids = [app.submit_run("triple", n, run_id=f"run-{n:03d}").run_id for n in range(total)]
            wait_for(lambda: statuses(db_url)["completed"] >= 5, 30, "runs to start", *workers)
            answered: dict[str, RunStatus] = {}
            for run_id in rng.sample(ids, total // 2):
                answered[run_id] = app.cancel_run(run_id).status
                time.sleep(rng.uniform(0, 0.08))
            done = {"completed", "cancelled"}
            wait_for(
                lambda: sum(n for s, n in statuses(db_url).items() if s in done) == total,
                60,
                "every run to end",
                *workers,
            )
            first = {run_id: app.store.get_run(run_id) for run_id in ids}
            time.sleep(2.5)  # longer than a lease: a late takeover or write would show now
            for worker in workers:
                worker.stop()
        effects = read_effects(*(w.effects for w in workers))

        ran: dict[str, list[str]] = defaultdict(list)
        for run_id, task, _ in effects:
            ran[run_id].append(task)
        outcomes: Counter[str] = Counter()
        for n, run_id in enumerate(ids):
            details = app.get_run(run_id)
            run = details.run
            assert run == first[run_id], run_id
            outcomes[run.status.value] += 1
            steps = [s.name for s in details.steps]
            assert sorted(ran[run_id]) == steps, (run_id, ran[run_id], steps)
            if run.status is RunStatus.COMPLETED:
                assert run.result == n * 1000 + 123
                assert steps == ["t1", "t2", "t3"]
                assert run.errors == []
                # Cancelled too late (it finished first), or not cancelled at all.
                assert answered.get(run_id) in (None, RunStatus.RUNNING, RunStatus.COMPLETED)
                continue
            assert run.status is RunStatus.CANCELLED, run_id
            assert run_id in answered
            assert answered[run_id] in (RunStatus.CANCELLED, RunStatus.RUNNING)
            assert run.result is None
            assert run.finished_at is not None
            assert steps == ["t1", "t2", "t3"][: len(steps)]
            if answered[run_id] is RunStatus.CANCELLED:  # still queued: it never started
                assert steps == []
                assert run.executions == 0
            else:
                assert run.error == CANCELLED
        assert sum(outcomes.values()) == total
        assert outcomes["cancelled"] >= 1
        assert outcomes["completed"] >= total // 2
    finally:
        app.close()
