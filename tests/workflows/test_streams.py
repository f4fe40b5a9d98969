"""Durable streams (``ctx.stream`` → ``app.read_stream``), on SQLite and PostgreSQL: reads
live and after the run, resuming from a position, the end on completion, failure, cancel and
close, replays that write nothing twice, task retries tagged by attempt, refusals, and a
worker process streaming tokens (one SIGKILLed mid-stream) read from this one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longcall import App, RetryPolicy, RunStatus
from longcall.core.clock import FakeClock
from longcall.core.retention import Retention
from longcall.errors import InvalidValue, RunNotFound
from longcall.workflows import StreamClosed, TaskContext
from procs import sql_rows

from .stream_procs import build_app
from .test_timers import kill, wait_for, worker_running

SCRIPT = Path(__file__).resolve().with_name("stream_procs.py")


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    with App(db_url, clock=clock, run_lease="2s") as app:
        yield app


def values(app: App, run_id: str, key: str, **options: Any) -> list[Any]:
    return [item.value for item in app.read_stream(run_id, key, **options)]


def test_body_and_task_writes_are_read_after_the_run_from_the_start(app: App) -> None:
    @app.task
    def speak(count: int, ctx: TaskContext) -> int:
        for n in range(count):
            ctx.stream("tokens", f"w{n}")
        return count

    @app.workflow
    def talker(ctx: TaskContext) -> int:
        ctx.stream("status", {"stage": "start"})
        said = speak(3)
        ctx.stream("status", None)  # JSON null is a value, not the end
        return said

    run = app.submit_run(talker)
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED
    items = list(app.read_stream(run.run_id, "tokens"))
    assert [(i.seq, i.value) for i in items] == [(1, "w0"), (2, "w1"), (3, "w2")]
    assert len({i.attempt for i in items}) == 1 and items[0].attempt is not None
    status = list(app.read_stream(run.run_id, "status"))
    assert [(i.seq, i.value, i.attempt) for i in status] == [
        (1, {"stage": "start"}, None),
        (2, None, None),
    ]
    assert values(app, run.run_id, "tokens", after=2) == ["w2"]
    assert values(app, run.run_id, "tokens", after=3) == []
    assert values(app, run.run_id, "never-written") == []


def test_a_replayed_body_writes_nothing_twice(app: App, clock: FakeClock) -> None:
    @app.workflow
    def napper(ctx: TaskContext) -> str:
        ctx.stream("log", "before")
        ctx.stream("log", "before, again")
        ctx.sleep(60)
        ctx.stream("log", "after")
        return "ok"

    run = app.submit_run(napper)
    assert app.continue_run(run.run_id).status is RunStatus.SLEEPING
    items, ended = app.stream_items(run.run_id, "log")
    assert [i.value for i in items] == ["before", "before, again"] and not ended
    clock.advance(61)
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED  # replays the body
    assert values(app, run.run_id, "log") == ["before", "before, again", "after"]


def test_a_retried_task_keeps_each_attempts_writes_tagged(app: App) -> None:
    tries: list[int] = []

    @app.task(retry=RetryPolicy(max_attempts=2, initial=0.01, jitter=False))
    def flaky(ctx: TaskContext) -> str:
        tries.append(1)
        ctx.stream("tokens", "partial")
        if len(tries) == 1:
            raise RuntimeError("model dropped the connection")
        ctx.stream("tokens", "whole")
        return "ok"

    @app.workflow
    def wf(ctx: TaskContext) -> str:
        return flaky()

    run = app.submit_run(wf)
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED
    items = list(app.read_stream(run.run_id, "tokens"))
    assert [i.value for i in items] == ["partial", "partial", "whole"]
    first, second = items[0].attempt, items[1].attempt
    assert first is not None and second is not None and first != second
    assert first.endswith(".a1") and second.endswith(".a2") and items[2].attempt == second


def test_a_live_reader_gets_items_as_written_then_the_end(app: App) -> None:
    gate = threading.Event()

    @app.task
    def speak(ctx: TaskContext) -> None:
        ctx.stream("tokens", "first")
        gate.wait(10)
        ctx.stream("tokens", "second")

    @app.workflow
    def wf(ctx: TaskContext) -> str:
        speak()
        return "ok"

    run = app.submit_run(wf)
    got: list[tuple[float, Any]] = []

    def reader() -> None:
        for item in app.read_stream(run.run_id, "tokens", timeout=30):
            got.append((time.monotonic(), item.value))

    thread = threading.Thread(target=reader)
    with worker_running(app):
        thread.start()
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline, "the first token never arrived"
            time.sleep(0.01)
        assert app.get_run(run.run_id).run.status is RunStatus.RUNNING  # read live
        gate.set()
        wait_for(app, run.run_id, RunStatus.COMPLETED)
        thread.join(10)
    assert not thread.is_alive() and [v for _, v in got] == ["first", "second"]


def test_the_stream_ends_when_the_run_fails(app: App) -> None:
    @app.workflow
    def broken(ctx: TaskContext) -> None:
        ctx.stream("tokens", "half")
        raise ValueError("boom")

    run = app.submit_run(broken)
    assert app.continue_run(run.run_id).status is RunStatus.FAILED
    assert values(app, run.run_id, "tokens", timeout=10) == ["half"]


def test_the_stream_ends_when_the_run_is_cancelled(app: App) -> None:
    @app.workflow
    def napper(ctx: TaskContext) -> None:
        ctx.stream("tokens", "before the nap")
        ctx.sleep(3600)

    run = app.submit_run(napper)
    assert app.continue_run(run.run_id).status is RunStatus.SLEEPING
    got: list[Any] = []
    thread = threading.Thread(
        target=lambda: got.extend(values(app, run.run_id, "tokens", timeout=30))
    )
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # the run is asleep, not over: the reader waits
    app.cancel_run(run.run_id)
    thread.join(10)
    assert not thread.is_alive() and got == ["before the nap"]


def test_close_ends_the_stream_and_refuses_more(app: App) -> None:
    @app.workflow
    def closer(ctx: TaskContext) -> str:
        ctx.stream("answer", "42")
        ctx.close_stream("answer")
        ctx.close_stream("answer")  # closing twice does nothing
        try:
            ctx.stream("answer", "43")
        except StreamClosed as exc:
            refused = str(exc)
        ctx.sleep(3600)  # still running: only the close ends the stream
        return refused

    run = app.submit_run(closer)
    assert app.continue_run(run.run_id).status is RunStatus.SLEEPING
    assert values(app, run.run_id, "answer", timeout=10) == ["42"]
    assert app.stream_items(run.run_id, "answer")[1] is True


def test_an_async_workflow_streams_and_an_async_reader_reads(app: App) -> None:
    @app.task
    async def speak(ctx: TaskContext) -> None:
        for word in ("a", "b"):
            await ctx.stream_async("tokens", word)

    @app.workflow
    async def wf(ctx: TaskContext) -> str:
        ctx.stream("tokens", "start")
        await speak()
        return "ok"

    run = app.submit_run(wf)
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED

    async def read() -> list[Any]:
        return [i.value async for i in app.read_stream_async(run.run_id, "tokens", after=1)]

    assert asyncio.run(read()) == ["a", "b"]


def test_bad_reads_are_refused_before_anything_is_read(app: App) -> None:
    @app.workflow
    def napper(ctx: TaskContext) -> None:
        ctx.sleep(3600)

    run = app.submit_run(napper)
    with pytest.raises(RunNotFound):
        app.read_stream("no-such-run", "tokens")
    with pytest.raises(InvalidValue, match="key"):
        app.read_stream(run.run_id, "")
    with pytest.raises(InvalidValue):
        app.read_stream(run.run_id, "bad\x00key")
    with pytest.raises(ValueError, match="after"):
        app.read_stream(run.run_id, "tokens", after=-1)
    with pytest.raises(TimeoutError, match="tokens"):
        list(app.read_stream(run.run_id, "tokens", timeout=0.2))  # queued: nothing comes


def test_bad_writes_fail_the_run_with_a_clear_error(app: App) -> None:
    @app.workflow
    def bad(ctx: TaskContext) -> None:
        ctx.stream("", "value")

    run = app.submit_run(bad)
    failed = app.continue_run(run.run_id)
    assert failed.status is RunStatus.FAILED and "stream key" in failed.error["message"]


def test_streams_go_with_their_run_when_it_is_pruned(app: App, clock: FakeClock) -> None:
    @app.workflow
    def talker(ctx: TaskContext) -> None:
        ctx.stream("tokens", "kept a while")

    run = app.submit_run(talker)
    app.continue_run(run.run_id)
    count = "SELECT COUNT(*) FROM lc_run_streams"
    assert sql_rows(app.url, count) == [(1,)]
    clock.advance(31 * 86400)
    assert app.prune(Retention(jobs=None, runs=30 * 86400, webhooks=None))["runs"] == 1
    assert sql_rows(app.url, count) == [(0,)]


# -- across processes -------------------------------------------------------------------------


def spawn(url: str, tmp_path: Path, name: str, *extra: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), "--url", url, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def test_tokens_from_a_task_in_a_worker_process_are_read_live(db_url: str, tmp_path: Path) -> None:
    """A worker process streams 20 tokens 50 ms apart; this process reads them as they come
    (the first long before the run ends), in order, once each, then the end."""
    with build_app(db_url) as app:
        run = app.submit_run("talker", {"count": 20, "gap": 0.05})
        worker = spawn(db_url, tmp_path, "w")
        try:
            arrivals = [
                (time.monotonic(), i.seq, i.value)
                for i in app.read_stream(run.run_id, "tokens", timeout=60)
            ]
            ended = time.monotonic()
            done = wait_for(app, run.run_id, RunStatus.COMPLETED, seconds=30)
        finally:
            kill(worker)
        status = values(app, run.run_id, "status")
    assert [(s, v) for _, s, v in arrivals] == [(n + 1, f"w{n} ") for n in range(20)]
    assert ended - arrivals[0][0] > 0.5  # 19 gaps of 50 ms: the first came early
    assert done.result == "".join(f"w{n} " for n in range(20))
    assert status == ["started", "done"]


@pytest.mark.slow
def test_a_worker_killed_mid_stream_leaves_a_tagged_partial_attempt(
    db_url: str, tmp_path: Path
) -> None:
    """Worker A streams 3 tokens and is SIGKILLed; worker B runs the task again from its
    start. The reader sees A's 3 tokens, then B's 6 under another attempt, no seq twice."""
    marker = tmp_path / "blocked"
    with build_app(db_url) as app:
        run = app.submit_run("talker", {"count": 6, "gap": 0.0})
        first = spawn(db_url, tmp_path, "a", "--block-after", "3", "--marker", str(marker))
        try:
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert time.monotonic() < deadline, (tmp_path / "a.err").read_text()
                time.sleep(0.02)
        finally:
            kill(first)
        second = spawn(db_url, tmp_path, "b")
        try:
            items = list(app.read_stream(run.run_id, "tokens", timeout=60))
            wait_for(app, run.run_id, RunStatus.COMPLETED, seconds=30)
        finally:
            kill(second)
        status = values(app, run.run_id, "status")
    assert [i.seq for i in items] == list(range(1, 10))
    assert [i.value for i in items] == [f"w{n} " for n in (0, 1, 2, 0, 1, 2, 3, 4, 5)]
    attempts = [i.attempt for i in items]
    assert len(set(attempts[:3])) == 1 and len(set(attempts[3:])) == 1
    assert attempts[0] != attempts[3]
    assert status == ["started", "done"]  # the body's write was not made again on resume


def test_tasks_writing_one_stream_at_once_lose_nothing(app: App) -> None:
    """Two async tasks write 40 items each to one stream at the same time, from the
    runtime's threads: 80 items, seq 1..80 with no gap, each task's in its own order."""

    @app.task
    async def speak(name: str, ctx: TaskContext) -> None:
        for n in range(40):
            await ctx.stream_async("tokens", f"{name}{n}")

    @app.workflow
    async def chorus(ctx: TaskContext) -> str:
        await asyncio.gather(speak("a"), speak("b"))
        return "ok"

    run = app.submit_run(chorus)
    assert app.continue_run(run.run_id).status is RunStatus.COMPLETED
    items = list(app.read_stream(run.run_id, "tokens"))
    assert [i.seq for i in items] == list(range(1, 81))
    for name in "ab":
        mine = [i.value for i in items if i.value.startswith(name)]
        assert mine == [f"{name}{n}" for n in range(40)]


def test_a_running_run_cancelled_mid_stream_ends_its_stream(app: App) -> None:
    """The run is cancelled while its task streams; it stops at its next task call, and a
    live reader gets what was written, then the end."""
    gate = threading.Event()

    @app.task
    def speak(ctx: TaskContext) -> None:
        ctx.stream("tokens", "one")
        gate.wait(10)
        ctx.stream("tokens", "two")

    @app.task
    def never() -> None:
        raise AssertionError("a cancelled run called its next task")

    @app.workflow
    def wf(ctx: TaskContext) -> None:
        speak()
        never()

    run = app.submit_run(wf)
    got: list[Any] = []
    with worker_running(app):
        thread = threading.Thread(
            target=lambda: got.extend(values(app, run.run_id, "tokens", timeout=30))
        )
        thread.start()
        deadline = time.monotonic() + 10
        while app.stream_items(run.run_id, "tokens")[0] == []:
            assert time.monotonic() < deadline, "the task never wrote"
            time.sleep(0.01)
        app.cancel_run(run.run_id)
        gate.set()
        wait_for(app, run.run_id, RunStatus.CANCELLED)
        thread.join(10)
    assert not thread.is_alive() and got == ["one", "two"]
