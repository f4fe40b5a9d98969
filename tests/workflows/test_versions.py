"""Workflow versions: runs record the version that started them, workers claim only the
versions they registered (separate processes, a mixed fleet), ``ctx.patched`` on replay,
listing and draining by version, and the refusals of bad versions."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from longcall import App, RunStatus
from longcall.errors import InvalidValue, RunStateError, WorkflowError
from longcall.workflows import RetryPolicy, TaskContext

from .bg_procs import sql_rows
from .version_procs import build_app, read_effects

SCRIPT = Path(__file__).resolve().with_name("version_procs.py")


class Worker:
    """A worker process registering one version of ``order``."""

    def __init__(self, url: str, directory: Path, version: str, *options: str) -> None:
        self.version = version
        name = f"v{version}-{len(list(directory.glob('*.err')))}"
        self.effects = directory / f"{name}.effects"
        self.err = directory / f"{name}.err"
        with self.err.open("wb") as err:
            self.popen = subprocess.Popen(
                [
                    *(sys.executable, str(SCRIPT), "--url", url, "--version", version),
                    *("--effects", str(self.effects)),
                    *options,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.pid = self.popen.pid

    def stop(self) -> None:
        self.popen.send_signal(signal.SIGTERM)
        assert self.popen.wait(30) == 0, self.err.read_text()
        assert "Traceback" not in self.err.read_text(), self.err.read_text()

    def reap(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


@contextmanager
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.reap()


def wait_for(check: Callable[[], bool], seconds: float, what: str, *procs: Worker) -> None:
    give_up = time.monotonic() + seconds
    while not check():
        for proc in procs:
            assert proc.popen.poll() is None, f"v{proc.version} died: {proc.err.read_text()}"
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.05)


def by_version(url: str) -> dict[tuple[str, str], int]:
    rows = sql_rows(url, "SELECT version, status, COUNT(*) FROM lc_runs GROUP BY 1, 2")
    return {(version, status): int(n) for version, status, n in rows}


# -- a mixed fleet ---------------------------------------------------------------------------


def test_a_mixed_fleet_runs_each_version_only_on_workers_that_registered_it(
    db_url: str, tmp_path: Path
) -> None:
    """With only a version-2 worker up, version-1 runs stay queued (not failed, never
    claimed: executions 0) and the summary shows them; a version-1 worker then starts and
    takes exactly those. Every task of a run ran in the process of its version's worker."""
    v1, v2 = build_app(db_url, "1"), build_app(db_url, "2")
    try:
        with workers() as started:
            started.append(worker2 := Worker(db_url, tmp_path, "2"))
            old = [v1.submit_run("order", n).run_id for n in range(6)]
            new = [v2.submit_run("order", n).run_id for n in range(6, 12)]
            assert {v1.store.get_run(r).version for r in old} == {"1"}
            assert {v2.store.get_run(r).version for r in new} == {"2"}

            def all_done(ids: list[str]) -> Callable[[], bool]:
                return lambda: all(v1.store.get_run(r).status.terminal for r in ids)

            wait_for(all_done(new), 60, "the version-2 runs", worker2)
            time.sleep(0.5)  # several polls of the worker: it still leaves version 1 alone
            assert by_version(db_url) == {("1", "queued"): 6, ("2", "completed"): 6}
            assert {v1.store.get_run(r).executions for r in old} == {0}
            [summary] = v1.run_versions("order")
            assert (summary.version, summary.counts["queued"], summary.active) == ("1", 6, 6)
            assert {r.run_id for r in v1.list_runs(version="1", status=RunStatus.QUEUED)} == set(
                old
            )

            started.append(worker1 := Worker(db_url, tmp_path, "1"))
            wait_for(all_done(old), 60, "the version-1 runs", worker1, worker2)
            assert v1.run_versions() == []  # both drained
            worker1.stop()
            worker2.stop()
        for run_id in old:
            assert v1.store.get_run(run_id).result["code"] == ["1"]
        for run_id in new:
            assert v1.store.get_run(run_id).result["code"] == ["2"]
        effects = read_effects(worker1.effects, worker2.effects)
        assert {(r, t) for r, t, _, _ in effects} >= {(r, t) for r in old for t in ("charge",)}
        for run_id, task, version, pid in effects:
            expected = (worker1.pid, "1") if run_id in old else (worker2.pid, "2")
            assert (pid, version) == expected, (run_id, task)
        assert sorted(t for r, t, _, _ in effects if r == old[0]) == ["charge", "ship"]
        assert sorted(t for r, t, _, _ in effects if r == new[0]) == ["charge", "notify", "ship"]
    finally:
        v1.close()
        v2.close()


def test_a_worker_does_not_take_over_an_abandoned_run_of_another_version(db_url: str) -> None:
    """A run whose holder died is taken over only by a worker that registered its version."""
    v1, v2 = build_app(db_url, "1"), build_app(db_url, "2")
    try:
        run = v1.submit_run("order", 1)
        [(held, _, _)] = v1.store.claim_runs(
            "dead", limit=1, lease=0.2, registered={("order", "1")}
        )
        assert held.run_id == run.run_id
        time.sleep(0.4)  # the dead holder's lease runs out
        assert (
            v2.store.claim_runs("w2", limit=5, lease=30, registered=v2.workflows.registered()) == []
        )
        [(taken, _, _)] = v1.store.claim_runs(
            "w1", limit=5, lease=30, registered=v1.workflows.registered()
        )
        assert (taken.run_id, taken.holder, taken.executions) == (run.run_id, "w1", 2)
    finally:
        v1.close()
        v2.close()


def test_a_worker_leaves_runs_of_workflows_it_does_not_register_queued(db_url: str) -> None:
    """No registered pair matches: nothing is claimed (the run is not failed as unknown)."""
    v1 = build_app(db_url, "1")
    other = App(db_url)

    @other.workflow("elsewhere")
    def elsewhere(n: int) -> int:
        return n

    try:
        run = other.submit_run("elsewhere", 3)
        assert (
            v1.store.claim_runs("w", limit=5, lease=30, registered=v1.workflows.registered()) == []
        )
        assert v1.store.get_run(run.run_id).status is RunStatus.QUEUED
        claimed = other.store.claim_runs("w", limit=5, lease=30, registered={("elsewhere", "1")})
        assert [c[0].run_id for c in claimed] == [run.run_id]
    finally:
        v1.close()
        other.close()


def test_an_app_of_another_version_refuses_to_execute_a_run_here(db_url: str) -> None:
    """continue_run / answer in an app that registers another version: RunStateError naming
    both versions, and the run stays queued, untouched."""
    v1, v2 = build_app(db_url, "1"), build_app(db_url, "2")
    try:
        run = v1.submit_run("order", 5)
        with pytest.raises(RunStateError, match=r"version '1' of 'order'.*version '2'"):
            v2.continue_run(run.run_id)
        again = v2.store.get_run(run.run_id)
        assert (again.status, again.executions, again.holder) == (RunStatus.QUEUED, 0, None)
        assert v1.continue_run(run.run_id).result == {"n": 5, "code": ["1"]}
    finally:
        v1.close()
        v2.close()


def test_runs_made_before_versions_are_version_1_and_default_workers_run_them(
    db_url: str,
) -> None:
    """A run row written without a version (as before the migration) is version '1', the
    version of a workflow that declares none, and such an app executes it."""
    app = App(db_url)

    @app.workflow("plain")
    def plain(n: int) -> int:
        return n + 1

    try:
        assert app.workflows.registry["plain"].version == "1"
        app.store.create_run("old-run", "plain", 41)  # the store's own default
        assert app.store.get_run("old-run").version == "1"
        claimed = app.store.claim_runs(
            "w", limit=1, lease=30, registered=app.workflows.registered()
        )
        assert [c[0].run_id for c in claimed] == ["old-run"]
    finally:
        app.close()


def test_a_run_killed_after_its_patch_marker_is_taken_over_by_its_version_only(
    db_url: str, tmp_path: Path
) -> None:
    """SIGKILL a version-1 worker inside the task after ``ctx.patched`` recorded its marker:
    a version-2 worker already running never takes the run over; a second version-1 worker
    does, its replay answers True again from the marker, and the run completes on the new
    path with one marker and the task's one checkpoint."""
    block = tmp_path / "blocked"
    v1 = build_app(db_url, "1")
    try:
        with workers() as started:
            started.append(doomed := Worker(db_url, tmp_path, "1", "--block", str(block)))
            started.append(other := Worker(db_url, tmp_path, "2"))
            run = v1.submit_run("patchy")
            wait_for(block.exists, 60, "the task to block", doomed)
            assert step_names(v1, run.run_id) == ["longcall.patched"]
            doomed.popen.kill()
            assert doomed.popen.wait(10) == -signal.SIGKILL
            time.sleep(3)  # past the dead worker's 2 s lease: the version-2 worker leaves it
            assert v1.store.get_run(run.run_id).executions == 1
            started.append(heir := Worker(db_url, tmp_path, "1"))
            wait_for(
                lambda: v1.store.get_run(run.run_id).status.terminal,
                60,
                "the takeover",
                heir,
                other,
            )
            heir.stop()
            other.stop()
        done = v1.get_run(run.run_id)
        assert done.status is RunStatus.COMPLETED, done.run.error
        assert (done.run.result, done.run.executions) == ("new", 2)
        assert [s.name for s in done.steps] == ["longcall.patched", "slow"]
        ran = read_effects(doomed.effects, heir.effects, other.effects)
        assert [(task, pid) for _, task, _, pid in ran] == [
            ("slow", doomed.pid),
            ("slow", heir.pid),
        ]
    finally:
        v1.close()


# -- ctx.patched -----------------------------------------------------------------------------


def patch_app(url: str, *, patched: bool | None, seen: list[bool] | None = None) -> App:
    """``flow`` before a change (``patched`` None), with ``if ctx.patched("new-b")``, or with
    the patch deprecated (False: the new path only). It asks twice, so it replays twice."""
    app = App(url)

    @app.task(name="a")
    def a() -> str:
        return "a"

    @app.task(name="old_b")
    def old_b() -> str:
        return "old"

    @app.task(name="new_b")
    def new_b() -> str:
        return "new"

    @app.task(name="c")
    def c(x: str) -> str:
        return x + "!"

    @app.workflow("flow")
    def flow(ctx: TaskContext) -> list[str]:
        out = [a()]
        ctx.interrupt("first?")
        if patched is None:
            out.append(old_b())
        elif patched:
            took = ctx.patched("new-b")
            if seen is not None:
                seen.append(took)
            out.append(new_b() if took else old_b())
        else:
            ctx.deprecate_patch("new-b")
            out.append(new_b())
        ctx.interrupt("second?")
        out.append(c(out[-1]))
        return out

    return app


def step_names(app: App, run_id: str) -> list[str]:
    return [s.name for s in app.get_run(run_id).steps]


def test_patched_is_false_on_every_replay_of_a_run_that_passed_the_point_on_old_code(
    db_url: str,
) -> None:
    old = patch_app(db_url, patched=None)
    try:
        run = old.run_workflow("flow")
        run = old.answer(run.run_id, {"interrupt-1": True})  # past the patch point: old_b
        assert step_names(old, run.run_id) == ["a", "old_b"]
    finally:
        old.close()
    seen: list[bool] = []
    new = patch_app(db_url, patched=True, seen=seen)
    try:
        new.continue_run(run.run_id)  # a replay: still waiting on the second question
        done = new.answer(run.run_id, {"interrupt-2": True})
        assert done.status is RunStatus.COMPLETED, done.error
        assert done.result == ["a", "old", "old!"]
        assert seen == [False, False]
        assert step_names(new, run.run_id) == ["a", "old_b", "c"]  # no marker written
    finally:
        new.close()


def test_patched_is_true_for_a_new_run_and_stays_true_on_replay(db_url: str) -> None:
    seen: list[bool] = []
    app = patch_app(db_url, patched=True, seen=seen)
    try:
        run = app.run_workflow("flow")
        app.answer(run.run_id, {"interrupt-1": True})
        app.continue_run(run.run_id)
        done = app.answer(run.run_id, {"interrupt-2": True})
        assert done.result == ["a", "new", "new!"]
        assert seen == [True, True, True]
        steps = app.get_run(run.run_id).steps
        assert [s.name for s in steps] == ["a", "longcall.patched", "new_b", "c"]
        assert steps[1].result == {"change_id": "new-b"}
    finally:
        app.close()


def test_patched_is_true_for_an_old_run_that_had_not_reached_the_point(db_url: str) -> None:
    """Started on the old code, waiting before the change: nothing recorded conflicts, so
    it takes the new path."""
    old = patch_app(db_url, patched=None)
    try:
        run = old.run_workflow("flow")
        assert step_names(old, run.run_id) == ["a"]
    finally:
        old.close()
    new = patch_app(db_url, patched=True)
    try:
        new.answer(run.run_id, {"interrupt-1": True})
        done = new.answer(run.run_id, {"interrupt-2": True})
        assert done.result == ["a", "new", "new!"]
    finally:
        new.close()


def test_deprecate_patch_replays_runs_with_the_marker_and_records_none_for_new_ones(
    db_url: str,
) -> None:
    with_patch = patch_app(db_url, patched=True)
    try:
        marked = with_patch.run_workflow("flow")
        with_patch.answer(marked.run_id, {"interrupt-1": True})
    finally:
        with_patch.close()
    app = patch_app(db_url, patched=False)
    try:
        done = app.answer(marked.run_id, {"interrupt-2": True})
        assert done.status is RunStatus.COMPLETED, done.error
        assert done.result == ["a", "new", "new!"]
        fresh = app.run_workflow("flow")
        app.answer(fresh.run_id, {"interrupt-1": True})
        assert app.answer(fresh.run_id, {"interrupt-2": True}).result == ["a", "new", "new!"]
        assert step_names(app, fresh.run_id) == ["a", "new_b", "c"]
    finally:
        app.close()


def test_deprecating_a_patch_before_old_runs_drained_fails_them_loudly(db_url: str) -> None:
    """An old run (past the point without the marker) on code with the patch deprecated:
    the new path's call meets the old call's checkpoint, a NonDeterminismError that names
    the way out, never the old call's result handed to the new one."""
    old = patch_app(db_url, patched=None)
    try:
        run = old.run_workflow("flow")
        old.answer(run.run_id, {"interrupt-1": True})
    finally:
        old.close()
    app = patch_app(db_url, patched=False)
    try:
        failed = app.answer(run.run_id, {"interrupt-2": True})
        assert failed.status is RunStatus.FAILED
        assert failed.error["type"] == "NonDeterminismError"
        assert "ctx.patched" in failed.error["message"]
        assert step_names(app, run.run_id) == ["a", "old_b"]
    finally:
        app.close()


def test_patched_survives_a_failed_attempt_retried_from_its_checkpoints(db_url: str) -> None:
    """The marker is a checkpoint: an attempt that fails after it (a crash, to the run) is
    retried by a worker, and the replay takes the same path without a second marker."""
    app = App(db_url, run_retry="10ms")
    seen: list[bool] = []
    attempts: list[int] = []

    @app.task(name="flaky", retry=RetryPolicy(max_attempts=1))
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("the first attempt dies")
        return "ok"

    @app.workflow("patchy")
    def patchy(ctx: TaskContext) -> str:
        took = ctx.patched("p1")
        seen.append(took)
        return flaky() if took else "old"

    async def work(run_id: str) -> None:
        stop = asyncio.Event()
        worker = app.run_worker(poll_interval="20ms")
        task = asyncio.create_task(worker.run(stop))
        give_up = time.monotonic() + 30
        while not app.store.get_run(run_id).status.terminal:
            assert time.monotonic() < give_up, "the run did not finish"
            await asyncio.sleep(0.02)
        stop.set()
        await task

    try:
        run = app.submit_run("patchy", max_retries=2)
        asyncio.run(work(run.run_id))
        done = app.get_run(run.run_id)
        assert done.status is RunStatus.COMPLETED, done.run.error
        assert (done.run.result, seen, len(attempts)) == ("ok", [True, True], 2)
        assert [s.name for s in done.steps] == ["longcall.patched", "flaky"]
    finally:
        app.close()


def test_patched_in_an_async_workflow_is_a_plain_bool(db_url: str) -> None:
    app = App(db_url)

    @app.task(name="twice")
    async def twice(n: int) -> int:
        return n * 2

    @app.workflow("async_patchy")
    async def async_patchy(n: int, ctx: TaskContext) -> Any:
        if ctx.patched("double"):
            return await twice(n)
        return n

    try:
        run = app.run_workflow("async_patchy", 4)
        assert run.result == 8
        assert step_names(app, run.run_id) == ["longcall.patched", "twice"]
    finally:
        app.close()


def test_patched_refuses_bad_change_ids_and_calls_inside_a_task(db_url: str) -> None:
    app = App(db_url)

    @app.task(name="inner")
    def inner(ctx: TaskContext) -> bool:
        return ctx.patched("x")

    @app.workflow("bad_id")
    def bad_id(ctx: TaskContext) -> bool:
        return ctx.patched("")

    @app.workflow("in_task")
    def in_task() -> bool:
        return inner()

    try:
        failed = app.run_workflow("bad_id")
        assert failed.status is RunStatus.FAILED
        assert failed.error["type"] == "InvalidValue" and "change_id" in failed.error["message"]
        failed = app.run_workflow("in_task")
        assert failed.status is RunStatus.FAILED
        assert "ctx.patched belongs in the workflow body" in str(failed.error)
    finally:
        app.close()


# -- listing and bad input -------------------------------------------------------------------


def test_list_runs_and_the_version_summary_by_version(db_url: str) -> None:
    v1, v2 = build_app(db_url, "1"), build_app(db_url, "2")
    try:
        ones = {v1.submit_run("order", n).run_id for n in range(3)}
        twos = {v2.submit_run("order", n).run_id for n in range(2)}
        assert {r.run_id for r in v1.list_runs(version="1")} == ones
        assert {r.run_id for r in v1.list_runs(version="2", workflow_id="order")} == twos
        assert v1.list_runs(version="3") == []
        v2.continue_run(next(iter(twos)))  # one version-2 run completes
        summary = {(v.workflow_id, v.version): v for v in v1.run_versions()}
        assert set(summary) == {("order", "1"), ("order", "2")}
        assert summary["order", "1"].counts == {
            "queued": 3,
            "running": 0,
            "waiting_input": 0,
            "sleeping": 0,
        }
        assert summary["order", "2"].active == 1
        assert v1.run_versions("nothing") == []
    finally:
        v1.close()
        v2.close()


@pytest.mark.parametrize("bad", ["", " 2", "2 ", "v/2", "ü", "x" * 65, None, True, 2.0])
def test_a_bad_version_is_refused_at_registration_and_in_listings(db_url: str, bad: Any) -> None:
    app = App(db_url)
    try:
        with pytest.raises(InvalidValue, match="version"):
            app.workflow("wf", version=bad)
        assert "wf" not in app.workflows.registry
        if bad is not None:  # None lists every version
            with pytest.raises(InvalidValue, match="version"):
                app.list_runs(version=bad)
    finally:
        app.close()


def test_a_workflow_registered_twice_is_refused_whatever_its_version(db_url: str) -> None:
    """One app registers one version of a workflow: its workers claim runs of that one."""
    app = App(db_url)

    @app.workflow("wf", version="1")
    def first() -> int:
        return 1

    try:
        with pytest.raises(WorkflowError, match="already registered"):

            @app.workflow("wf", version="2")
            def second() -> int:
                return 2

        assert app.workflows.registered() == {("wf", "1")}
    finally:
        app.close()


def test_a_schedule_fires_runs_of_the_version_its_app_registers(db_url: str) -> None:
    """Cron runs are claimed by version like any other: they record the registered one."""
    app = build_app(db_url, "2")
    try:
        cron = app.crons.create("nightly", "order", "0 3 * * *", input=7)
        fire = app.crons.trigger(cron.cron_id)
        assert fire.run_id is not None
        assert app.store.get_run(fire.run_id).version == "2"
        assert app.continue_run(fire.run_id).result == {"n": 7, "code": ["2"]}
    finally:
        app.close()


@pytest.mark.postgres
def test_claims_of_registered_versions_keep_one_plan(pg_url: str) -> None:
    """A worker's claim, with its registered pairs, is planned once per connection as the
    claim without them is (tests/test_pg_plans.py), with version-1 runs queued ahead of the
    version-2 ones it takes."""
    import psycopg

    v1, v2 = build_app(pg_url, "1"), build_app(pg_url, "2")
    try:
        for n in range(100):
            v1.submit_run("order", n)
        for n in range(100):
            v2.submit_run("order", n)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE lc_runs")
        registered = v2.workflows.registered()
        for n in range(30):
            [(run, _, _)] = v2.store.claim_runs(
                f"w/{n}", limit=1, lease=30.0, registered=registered
            )
            assert run.version == "2"
        with v2.store.pool.connection() as conn:
            rows = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH ended AS%%'"
            ).fetchall()
    finally:
        v1.close()
        v2.close()
    assert [(r["generic_plans"], r["custom_plans"]) for r in rows] == [(30, 0)]
    assert by_version(pg_url) == {("1", "queued"): 100, ("2", "queued"): 70, ("2", "running"): 30}
