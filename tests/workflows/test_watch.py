"""The run workers' shared watch on PostgreSQL: one session listens for queued runs at a
time, hands the watch on when its worker is full or stopping, and loses it with its
connection; the next holder catches up on what was queued meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from longcall import App, RunStatus
from longcall.store._pg_listen import Listener, Watch
from longcall.store.runs import RUNS_CHANNEL

from .bg_procs import watch_locks
from .test_background import counting_claims, settled

pytestmark = pytest.mark.postgres


@pytest.fixture
def watches(pg_url: str) -> Iterator[list[Watch]]:
    made = [Watch(pg_url, RUNS_CHANNEL) for _ in range(3)]
    yield made
    for watch in made:
        watch.close()


def notify(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"NOTIFY {RUNS_CHANNEL}, 'queued'")


async def start_delay(app: App, started: dict[int, float], n: int, late: str) -> float:
    """Submit run ``n`` of "hold" and wait for its body to start: the seconds it took."""
    submitted = time.monotonic()
    await app.in_thread(app.submit_run, "hold", n)
    while n not in started:
        assert time.monotonic() - submitted < 5, late
        await asyncio.sleep(0.01)
    return started[n] - submitted


async def let_go(
    release: threading.Event, stops: list[asyncio.Event], workers: list[asyncio.Task[None]]
) -> None:
    """End the held runs and stop every worker."""
    release.set()
    for stop in stops:
        stop.set()
    await asyncio.gather(*workers)


def holding_apps(
    url: str, count: int, release: threading.Event, started: dict[int, float]
) -> list[App]:
    """``count`` apps on one database, each with the workflow "hold": run ``n`` notes in
    ``started`` when it began and holds its worker's slot until ``release``."""
    apps = [App(url, run_lease="5s") for _ in range(count)]
    for app in apps:

        @app.workflow("hold")
        def hold(n: int) -> int:
            started[n] = time.monotonic()
            release.wait(30)
            return n

    return apps


def start_workers(
    apps: list[App], concurrency: int
) -> tuple[list[asyncio.Event], list[asyncio.Task[None]]]:
    """A worker per app with a 30 s poll, so a run starts at once only by the watch."""
    stops = [asyncio.Event() for _ in apps]
    workers = [
        asyncio.create_task(app.run_worker(concurrency=concurrency, poll_interval="30s").run(stop))
        for app, stop in zip(apps, stops, strict=True)
    ]
    return stops, workers


def test_one_session_at_a_time_holds_the_watch_and_hears_the_notifications(
    pg_url: str, watches: list[Watch]
) -> None:
    first, second, third = watches
    assert first.take(1.0)
    assert not second.take(0.1) and not third.take(0.1)
    assert watch_locks(pg_url) == 1
    notify(pg_url)
    assert first.wait(5.0)
    assert not second.wait(0.1) and not third.wait(0.1)


def test_sessions_waiting_for_the_watch_raise_no_errors_on_the_server(
    pg_url: str, watches: list[Watch]
) -> None:
    """Waiting is not a lock wait cut short by lock_timeout: that logs an error on the server
    each time, twice a second per waiting worker, and can leave a DROP DATABASE elsewhere on
    the server waiting for this session. Errors roll their transaction back, so the
    database's rollback count says."""
    first, second, third = watches
    assert first.take(1.0)

    def rollbacks() -> int:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            return int(row[0]) if row else 0

    before = rollbacks()
    for _ in range(5):
        assert not second.take(0.05) and not third.take(0.05)
    second.close()  # a session reports its counts as it ends
    third.close()
    time.sleep(0.5)
    assert rollbacks() == before
    assert watch_locks(pg_url) == 1


def test_giving_up_hands_the_watch_to_a_session_waiting_for_it(
    pg_url: str, watches: list[Watch]
) -> None:
    first, second, _ = watches
    assert first.take(1.0)
    took: list[float] = []

    def wait_for_the_watch() -> None:
        if second.take(10):
            took.append(time.monotonic())

    waiter = threading.Thread(target=wait_for_the_watch)
    waiter.start()
    time.sleep(0.2)
    assert not took, "the watch was taken while its holder still had it"
    given = time.monotonic()
    first.give_up()
    waiter.join(10)
    assert took and took[0] - given < 1.0
    assert not first.take(0.1)
    notify(pg_url)
    assert second.wait(5.0)


def test_a_notification_read_with_a_statements_results_is_still_heard(pg_url: str) -> None:
    """A listener waits on its socket; a notification that reached it while a statement ran
    on its connection (taking the watch, say) was read with the results, and the socket
    will not show it again: the next wait reports it all the same."""
    listener = Listener(pg_url, RUNS_CHANNEL)
    try:
        assert not listener.wait(0.01)
        notify(pg_url)
        time.sleep(0.1)  # the listening session has sent it on
        listener._execute("SELECT 1")
        assert listener.wait(0.5)
        assert not listener.wait(0.1)
    finally:
        listener.close()


def test_a_holder_whose_connection_ends_loses_the_watch_to_the_next(
    pg_url: str, watches: list[Watch]
) -> None:
    first, second, _ = watches
    assert first.take(1.0)
    assert first._conn is not None
    pid = first._conn.info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert second.take(5.0), "the lock stayed with a session that is gone"
    assert not first.wait(0.2)
    assert not first.held


def test_a_full_worker_hands_the_watch_to_one_with_room(pg_url: str) -> None:
    """Two workers of one slot each and a 30 s poll: while the first is busy with a long run,
    a run submitted next starts on the second within a second, and so does a run submitted
    after the second worker too is full and the first has stopped."""
    release = threading.Event()
    started: dict[int, float] = {}
    first, second = holding_apps(pg_url, 2, release, started)

    async def main() -> None:
        stops, workers = start_workers([first, second], concurrency=1)
        try:
            await asyncio.sleep(0.5)  # both watch threads up: one holds the watch
            assert await start_delay(first, started, 1, "run 1 did not start") < 1.0
            took = await start_delay(first, started, 2, "run 2 did not start")
            assert took < 1.5, "the full worker kept the watch"
        finally:
            await let_go(release, stops, workers)

    try:
        asyncio.run(main())
        runs = first.store.list_runs(limit=10)
        assert sorted(r.status for r in runs) == [RunStatus.COMPLETED] * 2
    finally:
        first.close()
        second.close()


def test_a_burst_of_runs_reaches_every_worker_at_once(pg_url: str) -> None:
    """Four workers of one slot each and a 30 s poll: four runs submitted together start on
    all four within a fraction of a second. Each worker that fills hands the watch on at
    once, and the next one claims as it takes it."""
    release = threading.Event()
    started: dict[int, float] = {}
    apps = holding_apps(pg_url, 4, release, started)

    async def main() -> None:
        stops, workers = start_workers(apps, concurrency=1)
        try:
            await asyncio.sleep(0.5)  # every watch thread up: one holds the watch
            submitted = time.monotonic()
            for n in range(4):
                await apps[0].in_thread(apps[0].submit_run, "hold", n)
            while len(started) < 4:
                assert time.monotonic() - submitted < 5, f"only runs {sorted(started)} started"
                await asyncio.sleep(0.01)
            # Three hand-ons: when a holder looked up from its notifications only every half
            # second, the last run started a second or more after the submits.
            assert max(started.values()) - submitted < 0.6, started
        finally:
            await let_go(release, stops, workers)

    try:
        asyncio.run(main())  # one slot each: four runs going at once are on four workers
    finally:
        for app in apps:
            app.close()


def test_a_stopping_worker_gives_up_the_watch_while_its_run_finishes(pg_url: str) -> None:
    """A worker told to stop still finishes its long run, but a run submitted meanwhile starts
    at once on another worker instead of waiting for that worker's poll."""
    release = threading.Event()
    started: dict[int, float] = {}
    apps = holding_apps(pg_url, 2, release, started)

    async def main() -> Any:
        stops, workers = start_workers(apps, concurrency=2)
        try:
            await asyncio.sleep(0.5)
            await start_delay(apps[0], started, 1, "run 1 did not start")
            # Stop whichever worker took run 1: it keeps running it, and watches no more.
            holder = (await apps[0].in_thread(apps[0].store.list_runs))[0].holder
            assert holder is not None
            busy = 0 if holder.startswith(apps[0].holder) else 1
            stops[busy].set()
            await asyncio.sleep(0.1)
            assert await start_delay(apps[0], started, 2, "run 2 waited for a poll") < 1.5
        finally:
            await let_go(release, stops, workers)

    try:
        asyncio.run(main())
    finally:
        for app in apps:
            app.close()


def test_a_notified_run_executes_while_the_workers_event_loop_is_blocked(pg_url: str) -> None:
    """The watch's thread hands a notified run to a pool thread, which claims and executes
    it: a sync run submitted while the worker's event loop is blocked for a second starts
    and finishes within it."""
    app = App(pg_url)
    started: list[float] = []

    @app.workflow("quick")
    def quick(n: int) -> int:
        started.append(time.monotonic())
        return n

    async def main() -> tuple[float, float]:
        stop = asyncio.Event()
        worker = asyncio.create_task(app.run_worker(concurrency=2, poll_interval="30s").run(stop))
        await asyncio.sleep(0.5)  # the watch thread holds the watch
        submitter = threading.Timer(0.1, app.submit_run, ("quick", 1))
        blocked = time.monotonic()
        submitter.start()
        time.sleep(1.0)  # noqa: ASYNC251 - blocks the event loop on purpose
        unblocked = time.monotonic()
        submitter.join()
        stop.set()
        await worker
        return blocked, unblocked

    try:
        blocked, unblocked = asyncio.run(main())
        assert len(started) == 1
        assert blocked < started[0] < unblocked, "the run waited for the event loop"
        runs = app.store.list_runs(limit=10)
        assert [(r.status, r.result) for r in runs] == [(RunStatus.COMPLETED, 1)]
    finally:
        app.close()


def test_runs_claimed_by_notifications_and_by_the_loop_never_exceed_the_slots(
    pg_url: str,
) -> None:
    """A worker of three slots, given twelve runs at once, sync and async mixed: the pool
    threads the notifications start and the event loop's tasks together never execute more
    than three at a time, and every run completes."""
    app = App(pg_url)
    lock = threading.Lock()
    going = [0]
    peak = [0]

    def enter() -> None:
        with lock:
            going[0] += 1
            peak[0] = max(peak[0], going[0])

    def leave() -> None:
        with lock:
            going[0] -= 1

    @app.workflow("sync_hold")
    def sync_hold(n: int) -> int:
        enter()
        time.sleep(0.05)
        leave()
        return n

    @app.workflow("async_hold")
    async def async_hold(n: int) -> int:
        enter()
        await asyncio.sleep(0.05)
        leave()
        return n

    async def main() -> None:
        stop = asyncio.Event()
        worker = asyncio.create_task(app.run_worker(concurrency=3, poll_interval="0.2s").run(stop))
        await asyncio.sleep(0.5)
        for n in range(12):
            await app.in_thread(app.submit_run, ("sync_hold", "async_hold")[n % 3 == 0], n)
        give_up = time.monotonic() + 15
        while len([r for r in app.store.list_runs(limit=20) if r.status.terminal]) < 12:
            assert time.monotonic() < give_up, "the runs did not all finish"
            await asyncio.sleep(0.05)
        stop.set()
        await worker

    try:
        asyncio.run(main())
        runs = app.store.list_runs(limit=20)
        assert sorted(r.result for r in runs) == list(range(12))
        assert {r.status for r in runs} == {RunStatus.COMPLETED}
        assert peak[0] == 3, f"{peak[0]} runs went at once in three slots"
    finally:
        app.close()


async def _wait_done(app: App, count: int, seconds: float = 10) -> None:
    give_up = time.monotonic() + seconds
    while len([r for r in app.store.list_runs(limit=50) if r.status.terminal]) < count:
        assert time.monotonic() < give_up, "the runs did not all finish"
        await asyncio.sleep(0.02)


def test_runs_queued_while_a_chain_keeps_looking_are_left_to_it(pg_url: str) -> None:
    """A worker of four slots whose run has just ended and looked for the next: five runs
    queued while its next run executes are not claimed beside it, within ``claim_delay``,
    but taken one after another by that run's end, in one chain: one run at a time, and
    no claim but the two the idle worker made."""
    app = App(pg_url)
    claims = counting_claims(app)
    going, peak = [0], [0]
    first = threading.Event()

    @app.workflow("step")
    def step(n: int) -> int:
        first.set()
        going[0] += 1
        peak[0] = max(peak[0], going[0])
        time.sleep(0.1)
        going[0] -= 1
        return n

    async def main() -> None:
        stop = asyncio.Event()
        worker = app.run_worker(concurrency=4, poll_interval="30s", claim_delay="3s")
        running = asyncio.create_task(worker.run(stop))
        await asyncio.sleep(0.5)
        await app.in_thread(app.submit_run, "step", 0)
        await _wait_done(app, 1)  # its end looked for a next run: the worker is not idle
        first.clear()
        await app.in_thread(app.submit_run, "step", 1)
        assert await app.in_thread(first.wait, 5)
        for n in range(2, 7):  # while run 1 executes
            await app.in_thread(app.submit_run, "step", n)
        await _wait_done(app, 7)
        stop.set()
        await running

    try:
        asyncio.run(main())
        assert peak[0] == 1, f"{peak[0]} runs went at once"
        assert sum(claims) == 2 and claims[-2:] == [1, 1], claims  # after start: two claims
        runs = app.store.list_runs(limit=10)
        assert sorted(r.result for r in runs) == list(range(7))
    finally:
        app.close()


def test_a_run_left_to_a_chain_that_does_not_take_it_is_claimed_after_the_delay(
    pg_url: str,
) -> None:
    """A run queued just after another's end looked for the next, while the worker's only
    run in hand is a long one, is left to that run for ``claim_delay`` (0.3 s) and then
    claimed: it starts within a second, not at the next poll 30 s on."""
    app = App(pg_url)
    release = threading.Event()
    started: dict[int, float] = {}

    @app.workflow("quick")
    def quick(n: int) -> int:
        started[n] = time.monotonic()
        return n

    @app.workflow("long")
    def long(n: int) -> int:
        started[n] = time.monotonic()
        release.wait(30)
        return n

    async def main() -> float:
        stop = asyncio.Event()
        worker = app.run_worker(concurrency=4, poll_interval="30s", claim_delay="0.3s")
        running = asyncio.create_task(worker.run(stop))
        try:
            await asyncio.sleep(0.5)
            await app.in_thread(app.submit_run, "quick", 1)
            await _wait_done(app, 1)  # its end looked, and found nothing
            await app.in_thread(app.submit_run, "long", 2)
            while 2 not in started:
                assert not release.is_set()
                await asyncio.sleep(0.005)
            return await start_delay_of(app, started, 3)
        finally:
            release.set()
            stop.set()
            await running

    async def start_delay_of(app: App, started: dict[int, float], n: int) -> float:
        submitted = time.monotonic()
        await app.in_thread(app.submit_run, "quick", n)
        while n not in started:
            assert time.monotonic() - submitted < 5, "the run waited for the poll"
            await asyncio.sleep(0.005)
        return started[n] - submitted

    try:
        took = asyncio.run(main())
        assert 0.2 < took < 1.0, f"started after {took:.3f}s"
    finally:
        app.close()


def test_a_run_queued_while_a_notified_claim_is_in_flight_starts_at_once(pg_url: str) -> None:
    """The worker's two slots are held for the claim a notification started, so the next
    notification, for a run queued after that claim looked, finds no slot to claim with:
    the claim, on seeing it came back short with a notification heard meanwhile, has the
    worker look again. The first run waits for the second to start, so the second may not
    wait for the first to end (nor for the 30 s poll)."""
    app = App(pg_url)
    other_started = threading.Event()
    worker = app.run_worker(concurrency=2, poll_interval="30s", claim_delay="0s")
    claim_runs = app.store.claim_runs
    armed = threading.Event()
    claims: list[int] = []
    queued_at: list[float] = []
    started_at: list[float] = []

    def claim_then_queue(*args: Any, **kwargs: Any) -> Any:
        claimed = claim_runs(*args, **kwargs)
        claims.append(len(claimed))
        if armed.is_set() and [held[0].workflow_id for held in claimed] == ["waits"]:
            armed.clear()
            heard = worker._heard
            queued_at.append(time.monotonic())
            app.submit_run("starts", 2)
            give_up = time.monotonic() + 5
            while worker._heard == heard:  # its notification reaches the worker
                assert time.monotonic() < give_up, "the notification never came"
                time.sleep(0.002)
        return claimed

    app.store.claim_runs = claim_then_queue  # type: ignore[method-assign]

    @app.workflow("waits")
    def waits(n: int) -> bool:
        return other_started.wait(5)

    @app.workflow("starts")
    def starts(n: int) -> int:
        started_at.append(time.monotonic())
        other_started.set()
        return n

    async def main() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        try:
            await settled(app, pg_url, claims)
            armed.set()
            await app.in_thread(app.submit_run, "waits", 1)
            await _wait_done(app, 2)
        finally:
            stop.set()
            await running

    try:
        asyncio.run(main())
        took = started_at[0] - queued_at[0]
        assert took < 2.0, f"the second run started {took:.2f}s after it was queued"
        assert [r.result for r in app.store.list_runs(limit=5)] == [2, True]
    finally:
        app.close()
