"""Named queues: limits, priorities, rate limits and dedupe, at the store and through the App."""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from longcall import App, RunStatus, TaskContext
from longcall.core.clock import FakeClock
from longcall.core.queues import Queue, parse_rate
from longcall.errors import CronValidationError, DuplicateRun, QueueNotFound, RunStateError
from longcall.store import Store

from . import queue_procs
from .bg_procs import sql_rows
from .run_threads import worker_running

PROCS = Path(queue_procs.__file__).resolve()


def _submit(store: Store, run_id: str, queue: str, priority: int = 0) -> None:
    store.create_run(run_id, "wf", None, queue_name=queue, priority=priority)


_CLAIMS = itertools.count(1)


def _claim(
    store: Store, worker: str = "w1", limit: int = 10, names: list[str] | None = None
) -> list[str]:
    # A holder of its own for each claim, as a worker numbers its claims.
    holder = f"{worker}/{next(_CLAIMS)}"
    held = store.claim_queue_runs(holder, worker=f"{worker}/", limit=limit, lease=60.0,
                                  names=names)  # fmt: skip
    return [run.run_id for run, _, _ in held]


def test_parse_rate_reads_counts_and_periods() -> None:
    """'N/period' gives the count and the period in seconds; nonsense is refused."""
    assert parse_rate("100/min") == (100, 60.0)
    assert parse_rate("5/s") == (5, 1.0)
    assert parse_rate("10/30s") == (10, 30.0)
    assert parse_rate("1000/hour") == (1000, 3600.0)
    for bad in ("", "5", "0/s", "5/fortnight", "x/min", "-1/s"):
        with pytest.raises(ValueError, match="rate"):
            parse_rate(bad)


def test_queue_refuses_bad_limits() -> None:
    """A queue's limits are positive integers and its name a plain identifier."""
    with pytest.raises(ValueError, match="concurrency"):
        Queue("q", concurrency=0)
    with pytest.raises(ValueError, match="worker_concurrency"):
        Queue("q", worker_concurrency=True)
    with pytest.raises(ValueError, match="queue name"):
        Queue("bad name")


def test_claim_keeps_to_the_queue_concurrency(store: Store) -> None:
    """A queue with concurrency 3 hands out 3 runs, and one more only when one ends."""
    store.define_queue(Queue("q", concurrency=3))
    for i in range(6):
        _submit(store, f"r{i}", "q")
    assert _claim(store, "w1") == ["r0", "r1", "r2"]
    assert _claim(store, "w2") == []
    run = store.get_run("r0")
    store.end_run("r0", str(run.holder), RunStatus.COMPLETED, state={}, for_job=False)
    assert _claim(store, "w2") == ["r3"]


def test_claim_keeps_to_the_worker_concurrency(store: Store) -> None:
    """worker_concurrency caps one worker's runs of the queue; another worker takes more."""
    store.define_queue(Queue("q", concurrency=5, worker_concurrency=2))
    for i in range(6):
        _submit(store, f"r{i}", "q")
    assert _claim(store, "w1") == ["r0", "r1"]
    assert _claim(store, "w1") == []
    assert _claim(store, "w2") == ["r2", "r3"]
    assert _claim(store, "w3") == ["r4"]  # the queue's 5


def test_claim_orders_by_priority_then_age(store: Store, clock: FakeClock) -> None:
    """Lower priority first; runs of equal priority in the order they were submitted."""
    store.define_queue(Queue("q", concurrency=1, priority=True))
    for run_id, priority in [("a", 5), ("b", 1), ("c", 3), ("d", 1), ("e", 0)]:
        _submit(store, run_id, "q", priority)
        clock.advance(1)
    order = []
    for _ in range(5):
        (run_id,) = _claim(store)
        order.append(run_id)
        holder = str(store.get_run(run_id).holder)
        store.end_run(run_id, holder, RunStatus.COMPLETED, state={}, for_job=False)
    assert order == ["e", "b", "d", "c", "a"]


def test_rate_limit_counts_claims_in_the_sliding_period(store: Store, clock: FakeClock) -> None:
    """rate 2/10s: two claims, none more until the first is 10 s old, whatever ends."""
    store.define_queue(Queue("q", rate_limit=2, rate_period=10.0))
    for i in range(5):
        _submit(store, f"r{i}", "q")
    assert _claim(store, limit=1) == ["r0"]
    clock.advance(1)
    assert _claim(store) == ["r1"]
    assert _claim(store) == []
    clock.advance(8.5)
    assert _claim(store) == []
    clock.advance(1)  # r0's claim is 10.5 s old, r1's 9.5 s
    assert _claim(store) == ["r2"]
    clock.advance(1)
    assert _claim(store) == ["r3"]
    assert _claim(store) == []


def test_named_queue_runs_are_not_claimed_by_the_default_claim(store: Store) -> None:
    """claim_runs takes runs of no queue only; claim_queue_runs only the queues named."""
    store.define_queue(Queue("a"))
    store.define_queue(Queue("b"))
    _submit(store, "in-a", "a")
    _submit(store, "in-b", "b")
    store.create_run("plain", "wf", None)
    assert [r.run_id for r, _, _ in store.claim_runs("w/1", limit=10, lease=60.0)] == ["plain"]
    assert _claim(store, names=["b"]) == ["in-b"]
    assert _claim(store) == ["in-a"]


def test_dedupe_refuses_a_second_active_run(store: Store) -> None:
    """A dedupe id held by an active run raises DuplicateRun naming it; once it ends, not."""
    store.define_queue(Queue("q"))
    store.create_run("first", "wf", None, queue_name="q", dedupe_id="user-7")
    with pytest.raises(DuplicateRun) as raised:
        store.create_run("second", "wf", None, queue_name="q", dedupe_id="user-7")
    assert raised.value.run_id == "first"
    with pytest.raises(Exception, match="no run"):
        store.get_run("second")
    # Another queue, or another id, is not a duplicate.
    store.define_queue(Queue("other"))
    store.create_run("elsewhere", "wf", None, queue_name="other", dedupe_id="user-7")
    store.request_run_cancel("first")
    run, created = store.create_run("third", "wf", None, queue_name="q", dedupe_id="user-7")
    assert created and run.dedupe_id == "user-7"


def test_queue_stats_count_runs_by_status(store: Store, clock: FakeClock) -> None:
    """queue_stats: each queue's limits, its runs by status and its oldest queued run's age."""
    store.define_queue(Queue("q", concurrency=1, rate_limit=5, rate_period=60.0))
    store.define_queue(Queue("idle"))
    for i in range(3):
        _submit(store, f"r{i}", "q")
    clock.advance(30)
    _claim(store)
    stats = {s.queue.name: s for s in store.queue_stats()}
    assert stats["q"].counts == {"queued": 2, "running": 1}
    assert stats["q"].depth == 2
    assert stats["q"].oldest_queued_age == pytest.approx(30.0)
    assert stats["q"].queue.rate == "5/60s"
    assert stats["idle"].counts == {} and stats["idle"].oldest_queued_age is None


def test_app_submit_checks_the_queue(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Unknown queues, priorities a queue does not take and dedupe without a queue are refused;
    a redefinition wins with a warning; DuplicateRun names the active run."""
    app = App(db_url)
    try:

        @app.workflow("noop")
        def noop(n: int) -> int:
            return n

        app.queue("plain", concurrency=2)
        app.queue("ranked", priority=True)
        with pytest.raises(QueueNotFound):
            app.submit_run("noop", 1, queue="nowhere")
        with pytest.raises(ValueError, match="priorit"):
            app.submit_run("noop", 1, queue="plain", priority=3)
        with pytest.raises(ValueError, match="need a queue"):
            app.submit_run("noop", 1, dedupe_id="x")
        with pytest.raises(ValueError, match="rate"):
            app.queue("plain", rate="lots")
        first = app.submit_run("noop", 1, queue="ranked", priority=-2, dedupe_id="d")
        assert (first.queue_name, first.priority) == ("ranked", -2)
        with pytest.raises(DuplicateRun) as raised:
            app.submit_run("noop", 2, queue="ranked", dedupe_id="d")
        assert raised.value.run_id == first.run_id
        with caplog.at_level(logging.WARNING, logger="longcall.runs"):
            app.queue("plain", concurrency=3)
        assert "redefined" in caplog.text
        assert app.store.get_queue("plain") == Queue("plain", concurrency=3)
    finally:
        app.close()


def test_cron_schedule_submits_its_runs_to_its_queue(db_url: str) -> None:
    """A schedule created with queue= starts runs in that queue; an undeclared queue is
    refused with field ``queue`` and creates nothing."""
    app = App(db_url)
    try:

        @app.workflow("tick")
        def tick(_: None) -> None:
            return None

        app.queue("nightly", concurrency=1)
        with pytest.raises(CronValidationError) as refused:
            app.crons.create("bad", "tick", "@daily", queue="nowhere")
        assert refused.value.field == "queue" and app.crons.list() == []
        cron = app.crons.create("ok", "tick", "@daily", queue="nightly")
        assert app.crons.get(cron.cron_id).queue == "nightly"
        fire = app.crons.trigger(cron.cron_id)
        assert fire.run_id is not None
        assert app.store.get_run(fire.run_id).queue_name == "nightly"
        (stats,) = app.queue_stats()
        assert stats.depth == 1
    finally:
        app.close()


def test_worker_of_some_queues_runs_only_theirs(db_url: str) -> None:
    """A worker given queues runs theirs only; one given none runs every queue and the rest."""
    app = App(db_url, run_lease="5s")
    try:

        @app.workflow("echo")
        def echo(n: int) -> int:
            return n

        app.queue("emails", concurrency=2)
        app.queue("reports")
        runs = {
            "emails": [app.submit_run("echo", i, queue="emails") for i in range(4)],
            "reports": [app.submit_run("echo", i, queue="reports") for i in range(2)],
            None: [app.submit_run("echo", 9)],
        }

        async def drain(worker_queues: list[str] | None, expect: list[str]) -> None:
            stop = asyncio.Event()
            worker = app.run_worker(concurrency=4, poll_interval="50ms", queues=worker_queues)
            task = asyncio.create_task(worker.run(stop))
            for _ in range(400):
                if all(app.get_run(r).status is RunStatus.COMPLETED for r in expect):
                    break
                await asyncio.sleep(0.05)
            stop.set()
            await task

        emails = [r.run_id for r in runs["emails"]]
        asyncio.run(drain(["emails"], emails))
        assert all(app.get_run(r).status is RunStatus.COMPLETED for r in emails)
        others = [r.run_id for r in runs["reports"] + runs[None]]
        assert all(app.get_run(r).status is RunStatus.QUEUED for r in others)
        asyncio.run(drain(None, others))
        assert all(app.get_run(r).status is RunStatus.COMPLETED for r in others)
        stats = {s.queue.name: s for s in app.queue_stats()}
        assert stats["emails"].counts == {} and stats["reports"].depth == 0
    finally:
        app.close()


def test_only_the_queues_workers_execute_its_runs(db_url: str) -> None:
    """``app.continue_run`` and ``app.answer`` execute a run in the caller, where none of its
    queue's limits would count it: for a run of a named queue both are refused and change
    nothing; ``submit_answers`` leaves it to a worker, which keeps the limits."""
    app = App(db_url, run_lease="5s")
    try:

        @app.workflow("ask")
        def ask(ctx: TaskContext) -> str:
            return str(ctx.interrupt("Whose report?"))

        app.queue("approvals", concurrency=1)
        run_id = app.submit_run("ask", queue="approvals").run_id
        with pytest.raises(RunStateError, match=r"in queue 'approvals'.*a worker of that queue"):
            app.continue_run(run_id)
        with pytest.raises(RunStateError, match="in queue 'approvals'"):
            asyncio.run(app.continue_run_async(run_id))
        queued = app.store.get_run(run_id)
        assert (queued.status, queued.executions, queued.holder) == (RunStatus.QUEUED, 0, None)

        def until(status: RunStatus) -> None:
            deadline = time.monotonic() + 20
            while app.get_run(run_id).status is not status:
                assert time.monotonic() < deadline, app.get_run(run_id).status
                time.sleep(0.02)

        with worker_running(app):
            until(RunStatus.WAITING_INPUT)
            with pytest.raises(RunStateError, match="answer it with submit_answers"):
                app.answer(run_id, {"interrupt-1": "Ada"})
            waiting = app.get_run(run_id)
            assert waiting.status is RunStatus.WAITING_INPUT
            assert [i.key for i in waiting.pending] == ["interrupt-1"]  # the answer not stored
            app.submit_answers(run_id, {"interrupt-1": "Ada"})
            until(RunStatus.COMPLETED)
        assert app.get_run(run_id).run.result == "Ada"
    finally:
        app.close()


@contextmanager
def _workers(url: str, directory: Path, count: int) -> Iterator[list[Path]]:
    """``count`` worker processes of queue_procs.py; stopped (SIGTERM, then SIGKILL) after."""
    effects = [directory / f"w{i}.effects" for i in range(count)]
    procs = []
    for path in effects:
        with (directory / f"{path.stem}.err").open("wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(PROCS), "--url", url, "--effects", str(path)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    try:
        yield effects
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _wait_done(app: App, run_ids: list[str], sample: Callable[[], None], within: float) -> None:
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        sample()
        if all(app.get_run(r).status is RunStatus.COMPLETED for r in run_ids):
            return
    raise AssertionError(f"runs not completed within {within} s")


def test_concurrency_5_holds_across_4_worker_processes(db_url: str, tmp_path: Path) -> None:
    """4 worker processes (2 slots each for the queue: 8 > 5) never run 6 of a concurrency-5
    queue at once: sampled from the store while they work, and from the tasks' own times."""
    app = queue_procs.build_app(db_url)
    try:
        run_ids = [app.submit_run("held", 0.15, queue="limited").run_id for _ in range(40)]
        samples: list[int] = []

        def sample() -> None:
            rows = sql_rows(
                db_url,
                "SELECT count(*) FROM lc_runs WHERE queue_name = 'limited' AND status = 'running'",
            )
            samples.append(int(rows[0][0]))

        with _workers(db_url, tmp_path, 4) as effects:
            _wait_done(app, run_ids, sample, within=180)
        spans = queue_procs.read_spans(*effects)
        assert sorted(spans) == sorted(run_ids)
        at_once = queue_procs.most_at_once([(s, e) for _, s, e in spans.values()])
        assert max(samples) <= 5 and at_once <= 5, (max(samples), at_once)
        # The limit was reached for real: the test could have seen a sixth.
        assert at_once >= 3 and len({pid for pid, _, _ in spans.values()}) >= 2
        for pid in {pid for pid, _, _ in spans.values()}:
            mine = [(s, e) for p, s, e in spans.values() if p == pid]
            assert queue_procs.most_at_once(mine) <= 2  # worker_concurrency
    finally:
        app.close()


def test_rate_limit_holds_across_worker_processes(db_url: str, tmp_path: Path) -> None:
    """A 4/1s queue drained by 3 processes claims at most 4 runs in any window of the period
    (its claims sampled from the store, on the database's clock), and so takes the periods
    that implies (the tasks' own start times)."""
    count, period = queue_procs.RATE
    app = queue_procs.build_app(db_url)
    try:
        run_ids = [app.submit_run("held", 0.0, queue="rated").run_id for _ in range(14)]
        claims: dict[str, float] = {}

        def sample() -> None:
            # A claim stays recorded for at least the period: 50 ms samples see every one.
            rows = sql_rows(
                db_url, "SELECT run_id, started_at FROM lc_queue_starts WHERE queue_name = 'rated'"
            )
            claims.update((run_id, float(at)) for run_id, at in rows)
            time.sleep(0.05)

        with _workers(db_url, tmp_path, 3) as effects:
            _wait_done(app, run_ids, sample, within=180)
            sample()  # the last claims, made since the sample before the runs were seen done
        assert sorted(claims) == sorted(run_ids)
        at = sorted(claims.values())
        in_window = max(sum(1 for t in at if s <= t < s + period) for s in at)
        assert in_window <= count, [round(t - at[0], 3) for t in at]
        starts = sorted(s for _, s, _ in queue_procs.read_spans(*effects).values())
        assert len(starts) == 14
        assert starts[-1] - starts[0] >= (14 // count - 1) * period * 0.9
    finally:
        app.close()
