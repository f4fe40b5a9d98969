"""Holding runs cheaply: one heartbeat renews every lease an app holds, and the statement that
ends a worker's run claims its next one; on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from longcall import App, RunStatus
from longcall.core.runs import Run
from longcall.store.runs import Checkpoint, Held, NextClaim
from longcall.workflows._leases import Heartbeat

LEASE = 0.3  # a beat every 0.1 s


class Holding:
    """A stand-in execution: what the heartbeat told it."""

    def __init__(self, run_id: str, holder: str) -> None:
        self.lease_key = (run_id, holder)
        self.told: list[bool | None] = []
        self.told_event = threading.Event()

    def renewed(self, cancelling: bool | None) -> None:
        self.told.append(cancelling)
        self.told_event.set()

    def next_news(self, timeout: float = 5.0) -> bool | None:
        self.told_event.clear()
        assert self.told_event.wait(timeout), "the heartbeat did not beat"
        return self.told[-1]


@pytest.fixture
def app(db_url: str) -> Any:
    app = App(db_url)

    @app.workflow("noop")
    def noop(_: None) -> None:
        return None

    yield app
    app.close()


def held_run(app: App, run_id: str, holder: str) -> None:
    app.store.create_run(run_id, "noop", None, holder=holder, lease=LEASE)


def test_one_statement_a_beat_renews_every_held_run_and_tells_each_its_news(app: App) -> None:
    for name in ("a", "b", "c"):
        held_run(app, f"run-{name}", f"h-{name}")
    calls: list[int] = []
    real = app.store.renew_runs

    def counting(held: Any, **kwargs: Any) -> dict[tuple[str, str], bool]:
        calls.append(len(held))
        return real(held, **kwargs)

    app.store.renew_runs = counting  # type: ignore[method-assign]
    heartbeat = Heartbeat(app.store, LEASE)
    holdings = {n: Holding(f"run-{n}", f"h-{n}") for n in ("a", "b", "c")}
    try:
        for holding in holdings.values():
            heartbeat.hold(holding)
        assert holdings["a"].next_news() is False  # renewed, nobody asked it to stop
        assert set(calls) == {3}, "every held run renewed in one statement"

        before = app.store.get_run("run-a").lease_expires_at
        time.sleep(LEASE)  # without the heartbeat every lease would have run out by now
        assert app.store.claim_runs("thief", limit=10, lease=60) == []
        assert app.store.get_run("run-a").lease_expires_at > before  # type: ignore[operator]

        app.store.request_run_cancel("run-b")
        assert app.store.end_run("run-c", "h-c", RunStatus.COMPLETED, state={}) is not None
        assert holdings["b"].next_news() is True  # asked to stop: ctx.cancelled
        assert holdings["c"].next_news() is None  # no longer ours: the execution is lost

        heartbeat.release(holdings["a"])
        heartbeat.release(holdings["b"])
        heartbeat.release(holdings["c"])
        news = len(holdings["a"].told)
        time.sleep(LEASE)
        assert len(holdings["a"].told) == news, "a released execution hears nothing more"
    finally:
        heartbeat.close()


def test_a_run_held_by_another_holder_of_the_same_id_is_lost_to_this_one(app: App) -> None:
    held_run(app, "run-x", "new-holder")
    heartbeat = Heartbeat(app.store, LEASE)
    stale, current = Holding("run-x", "old-holder"), Holding("run-x", "new-holder")
    try:
        heartbeat.hold(stale)
        heartbeat.hold(current)
        assert current.next_news() is False
        assert stale.told == [None], "the holder that lost the run must stop writing"
    finally:
        heartbeat.close()


def queued(app: App, count: int) -> list[str]:
    return [app.submit_run("noop", None).run_id for _ in range(count)]


def end_claiming(
    app: App, run_id: str, holder: str, *, wanted: bool = True
) -> tuple[Run | None, list[list[Held]], bool]:
    """End ``run_id`` as ``holder`` (completed, result 1) and claim the next run for "w/2" in
    the same statement: the ended run, what was claimed, and whether the claim looked."""
    taken: list[list[Held]] = []
    then_claim = NextClaim("w/2", 60.0, 1, taken.append, wanted=lambda: wanted)
    ended = app.store.end_run(
        run_id,
        holder,
        RunStatus.COMPLETED,
        state={},
        result=1,
        for_job=False,
        then_claim=then_claim,
    )
    return ended, taken, then_claim.looked


def test_ending_a_run_claims_the_next_in_the_same_statement(app: App) -> None:
    first, second, third = queued(app, 3)
    [(run, _, _)] = app.store.claim_runs("w/1", limit=1, lease=60)
    assert run.run_id == first
    ended, taken, looked = end_claiming(app, first, "w/1")
    assert ended is not None and ended.status is RunStatus.COMPLETED and ended.result == 1
    assert looked, "the worker need not look for a run again"
    [[(claimed, steps, interrupts)]] = taken
    assert (claimed.run_id, claimed.holder, claimed.status) == (second, "w/2", RunStatus.RUNNING)
    assert (steps, interrupts) == ([], {})
    assert app.store.get_run(third).status is RunStatus.QUEUED


def test_an_end_that_is_not_the_holders_to_record_claims_nothing(app: App) -> None:
    first, second = queued(app, 2)
    app.store.claim_runs("w/1", limit=1, lease=60)
    ended, taken, looked = end_claiming(app, first, "somebody-else")
    assert ended is None and taken == []
    assert not looked, "the worker must look for a run itself"
    assert app.store.get_run(first).status is RunStatus.RUNNING
    assert app.store.get_run(second).status is RunStatus.QUEUED


def test_the_next_claim_takes_an_abandoned_run_first_with_its_record(app: App) -> None:
    [abandoned_id, ending_id] = queued(app, 2)
    app.store.claim_runs("dead", limit=1, lease=0.5)  # its holder dies: the lease runs out
    app.store.claim_runs("w/1", limit=1, lease=60)
    step = Checkpoint(1, "t", "x", 7, [], 1, time.time(), time.time())
    app.store.record_step(abandoned_id, "dead", step, ok=True)
    queued(app, 1)  # a queued one waits behind the abandoned one
    time.sleep(0.6)
    _, taken, _ = end_claiming(app, ending_id, "w/1")
    [[(claimed, steps, _)]] = taken
    assert claimed.run_id == abandoned_id and claimed.executions == 2
    assert [(s.position, s.result) for s in steps] == [(1, 7)], "it resumes from its checkpoint"


def test_a_stopping_worker_ends_its_run_without_claiming_another(app: App) -> None:
    first, second = queued(app, 2)
    app.store.claim_runs("w/1", limit=1, lease=60)
    ended, taken, looked = end_claiming(app, first, "w/1", wanted=False)
    assert ended is not None and ended.status is RunStatus.COMPLETED
    assert taken == [] and not looked
    assert app.store.get_run(second).status is RunStatus.QUEUED
