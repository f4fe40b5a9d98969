"""A worker's slot drains a backlog of sync runs in one thread: each run's end claims the
next, which the same thread executes (a chain). Cancellation, timeouts, async workflows and
stopping still reach the runs of a chain; on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from longcall import App, RunStatus

from .test_background import background_app, drain


def statuses(app: App, run_ids: list[str]) -> list[RunStatus]:
    return [app.get_run(r).status for r in run_ids]


def test_a_backlog_of_sync_runs_drains_in_one_thread_per_slot(db_url: str) -> None:
    """Twelve queued runs on a worker with one slot: each executes once, oldest first, all
    in the thread that executed the first."""
    app = background_app(db_url)
    seen: list[tuple[int, int]] = []

    @app.task(name="note")
    def note(n: int) -> int:
        seen.append((n, threading.get_ident()))
        return n

    @app.workflow("noted")
    def noted(n: int) -> int:
        return int(note(n)) * 10

    try:
        ids = [app.submit_run("noted", n).run_id for n in range(12)]
        drain(app, ids, concurrency=1, poll_interval="2s")
        assert [app.get_run(r).run.result for r in ids] == [n * 10 for n in range(12)]
        assert [n for n, _ in seen] == list(range(12))
        assert len({thread for _, thread in seen}) == 1
        assert {app.get_run(r).run.executions for r in ids} == {1}
    finally:
        app.close()


def test_a_cancel_reaches_a_run_in_the_middle_of_a_chain_at_its_next_task_call(
    db_url: str,
) -> None:
    """Three queued runs, one slot: the second, cancelled while its first task runs, ends
    cancelled at its next task call; the first and the third complete."""
    app = background_app(db_url)
    entered, release = threading.Event(), threading.Event()

    @app.task(name="part")
    def part(n: int, i: int) -> int:
        if n == 1 and i == 0:
            entered.set()
            release.wait(30)
        return i

    @app.workflow("two_parts")
    def two_parts(n: int) -> int:
        return int(part(n, 0)) + int(part(n, 1))

    try:
        ids = [app.submit_run("two_parts", n).run_id for n in range(3)]

        def cancel_second() -> None:
            assert entered.wait(30)
            assert app.cancel_run(ids[1]).status is RunStatus.RUNNING
            release.set()

        canceller = threading.Thread(target=cancel_second)
        canceller.start()
        try:
            drain(app, ids, concurrency=1, poll_interval="2s", grace="10s")
        finally:
            release.set()
            canceller.join(30)
        assert statuses(app, ids) == [RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.COMPLETED]
        assert [len(app.get_run(r).steps) for r in ids] == [2, 1, 2]
    finally:
        app.close()


def test_a_run_in_a_chain_still_going_after_the_grace_period_is_recorded_cancelled(
    db_url: str,
) -> None:
    """The second of three runs blocks past the grace period: it is recorded cancelled and
    the slot moves on to the third; when the blocked body returns, nothing it does counts."""
    app = background_app(db_url)
    entered, release = threading.Event(), threading.Event()

    @app.task(name="part")
    def part(n: int) -> int:
        return n

    @app.workflow("stuck")
    def stuck(n: int) -> int:
        part(n)
        if n == 1:
            entered.set()
            release.wait(30)  # no task call: only the grace period ends it
        return n

    try:
        ids = [app.submit_run("stuck", n).run_id for n in range(3)]

        def cancel_second() -> None:
            assert entered.wait(30)
            app.cancel_run(ids[1])

        canceller = threading.Thread(target=cancel_second)
        canceller.start()
        try:
            took = drain(app, ids, concurrency=1, poll_interval="2s", grace="500ms")
        finally:
            release.set()
            canceller.join(30)
        assert took < 10, "the third run waited for the blocked one"
        assert statuses(app, ids) == [RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.COMPLETED]
        time.sleep(0.2)  # the released body ends: its end is not its to record
        details = app.get_run(ids[1])
        assert details.status is RunStatus.CANCELLED and details.run.result is None
    finally:
        app.close()


def test_a_chain_hands_async_and_timed_runs_to_the_event_loop(db_url: str) -> None:
    """A backlog mixing sync, async and timed runs on one slot: the async one completes, the
    timed one fails with a Timeout after its 300 ms, and the sync ones around them complete."""
    app = background_app(db_url)

    @app.task(name="quick")
    def quick(n: int) -> int:
        return n

    @app.task(name="slow")
    def slow(n: int) -> int:
        time.sleep(2)
        return n

    @app.workflow("sync_one")
    def sync_one(n: int) -> int:
        return int(quick(n))

    @app.workflow("async_one")
    async def async_one(n: int) -> int:
        await asyncio.sleep(0.01)
        return n + 100

    @app.workflow("timed_one")
    def timed_one(n: int) -> int:
        return int(slow(n))

    try:
        ids = [
            app.submit_run("sync_one", 1).run_id,
            app.submit_run("async_one", 2).run_id,
            app.submit_run("sync_one", 3).run_id,
            app.submit_run("timed_one", 4, timeout="300ms").run_id,
            app.submit_run("sync_one", 5).run_id,
        ]
        drain(app, ids, concurrency=1, poll_interval="2s")
        runs = [app.get_run(r).run for r in ids]
        assert [r.status for r in runs] == [
            RunStatus.COMPLETED,
            RunStatus.COMPLETED,
            RunStatus.COMPLETED,
            RunStatus.FAILED,
            RunStatus.COMPLETED,
        ]
        assert [r.result for r in runs] == [1, 102, 3, None, 5]
        assert runs[3].error is not None and runs[3].error["type"] == "Timeout"
    finally:
        app.close()


def test_a_stopping_worker_finishes_the_run_in_its_chain_and_claims_no_more(
    db_url: str,
) -> None:
    """Stopped while the first of five queued runs executes: that run completes, the other
    four stay queued, never started."""
    app = background_app(db_url)
    entered, release = threading.Event(), threading.Event()

    @app.task(name="part")
    def part(n: int) -> int:
        if n == 0:
            entered.set()
            release.wait(30)
        return n

    @app.workflow("parted")
    def parted(n: int) -> int:
        return int(part(n))

    async def main(ids: list[str]) -> Any:
        stop = asyncio.Event()
        worker = app.run_worker(concurrency=1, poll_interval="2s")
        running = asyncio.create_task(worker.run(stop))
        assert await asyncio.to_thread(entered.wait, 30)
        stop.set()
        await asyncio.sleep(0.1)
        release.set()
        await asyncio.wait_for(running, 30)
        return worker.executed

    try:
        ids = [app.submit_run("parted", n).run_id for n in range(5)]
        try:
            executed = asyncio.run(main(ids))
        finally:
            release.set()
        assert executed == 1
        assert statuses(app, ids) == [RunStatus.COMPLETED] + [RunStatus.QUEUED] * 4
        assert {app.get_run(r).run.executions for r in ids[1:]} == {0}
    finally:
        app.close()
