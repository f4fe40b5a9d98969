"""What the dashboard asks of the store: a search of the jobs, when a job was attached, the runs
doing a job's work, and the workers alive with the workflows each can run.

Each test runs on SQLite and on PostgreSQL (``db_url``), with an authoritative fake clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import longcall
from longcall import CallIds, FakeClock, Job
from longcall.store import NewJob, Store
from longcall.store._workers import KEEP_DEAD
from longcall.store.core import contains_pattern


def create(store: Store, job_id: str, args: dict[str, Any] | None = None, **ids: str) -> Job:
    new = NewJob(job_id, "export", args or {}, CallIds(**ids), None)
    return store.create_job(new, holder="tool", dispatch_lease=60, dispatch=False)[0]


def found(store: Store, text: str, **filters: Any) -> list[str]:
    return [j.job_id for j in store.list_jobs(text=text, **filters)]


# -- search -----------------------------------------------------------------------------------


def test_a_search_looks_in_every_field_of_a_job_in_any_case(store: Store) -> None:
    """The text may be in the id, tool, session, user, call id or arguments, in any case."""
    create(store, "Report-Q3", user_id="alice", session_id="s-north", call_id="c-77")
    create(store, "other", {"region": "EMEA-West"}, user_id="bob")
    assert found(store, "report-q3") == ["Report-Q3"]
    assert found(store, "EXPORT") == ["other", "Report-Q3"]  # the tool, newest first
    assert found(store, "NORTH") == ["Report-Q3"]
    assert found(store, "c-77") == ["Report-Q3"]
    assert found(store, "emea-west") == ["other"]
    assert found(store, "bob") == ["other"]
    assert found(store, "nowhere") == []
    assert found(store, "report", user_id="bob") == []  # other filters still apply


def test_a_search_takes_wildcards_and_backslashes_literally(store: Store) -> None:
    """%, _ and \\ in the text match only themselves, never any character or run of them."""
    for job_id in ("a%b", "a_b", "axb", "a\\b", "plain"):
        create(store, job_id)
    assert found(store, "%") == ["a%b"]
    assert found(store, "_") == ["a_b"]
    assert found(store, "a_b") == ["a_b"]
    assert found(store, "\\") == ["a\\b"]
    assert contains_pattern("50%_\\") == "%50\\%\\_\\\\%"


def test_a_search_reaches_past_any_page(store: Store, clock: FakeClock) -> None:
    """The oldest job of 120 is found by its text, and paging goes on within the results."""
    create(store, "needle-0")
    for n in range(1, 120):
        clock.advance(1)
        create(store, f"hay-{n}")
    clock.advance(1)
    create(store, "needle-1")
    assert found(store, "needle", limit=1) == ["needle-1"]
    newest = store.get_job("needle-1")
    assert found(store, "needle", before=(newest.created_at, newest.job_id)) == ["needle-0"]


# -- attach time, runs of a job ---------------------------------------------------------------


def test_a_job_records_when_it_got_both_its_session_and_call(
    store: Store, clock: FakeClock
) -> None:
    """Created with both: attached then; created without: not until attach gives both, once."""
    joined = create(store, "joined", session_id="s-1", call_id="c-1")
    assert joined.attached_at == joined.created_at
    alone = create(store, "alone")
    assert alone.attached_at is None
    clock.advance(5)
    half = store.attach("alone", CallIds(session_id="s-2"))
    assert half.attached_at is None  # no call id yet
    clock.advance(5)
    whole = store.attach("alone", CallIds(session_id="s-2", call_id="c-2"))
    assert whole.attached_at == alone.created_at + 10
    clock.advance(5)
    again = store.attach("alone", CallIds(session_id="s-2", call_id="c-2", app_name="a"))
    assert again.attached_at == whole.attached_at
    assert store.get_job("alone").attached_at == whole.attached_at


def test_the_runs_doing_a_jobs_work_are_found_by_the_job(store: Store) -> None:
    """runs_of_job lists the job's runs, oldest first, and none for a job without one."""
    create(store, "j1")
    store.create_run("run-1", "report", None, job_id="j1")
    store.create_run("run-2", "report", None)
    assert [r.run_id for r in store.runs_of_job("j1")] == ["run-1"]
    assert store.runs_of_job("j2") == []


# -- workers ----------------------------------------------------------------------------------


def test_a_worker_is_live_until_its_beat_expires(store: Store, clock: FakeClock) -> None:
    """A beat makes the worker live with its workflows for ttl seconds; another moves that on
    and replaces them; forgetting it ends it at once."""
    store.beat_worker("w1", ["refund", "report", "refund"], ttl=30, first=True)
    (worker,) = store.live_workers()
    assert worker.worker_id == "w1" and worker.workflows == ("refund", "report")
    assert worker.heartbeat_at == worker.started_at == clock.now()
    assert worker.expires_at == clock.now() + 30
    clock.advance(29)
    store.beat_worker("w1", ["report"], ttl=30)
    clock.advance(29)
    (worker,) = store.live_workers()
    assert worker.workflows == ("report",) and worker.started_at == clock.now() - 58
    clock.advance(2)
    assert store.live_workers() == []  # its last beat has expired
    store.beat_worker("w2", [], ttl=30)
    store.forget_worker("w2")
    store.forget_worker("never-seen")
    assert store.live_workers() == []


def test_a_first_beat_deletes_workers_dead_for_a_day(store: Store, clock: FakeClock) -> None:
    """Rows of workers that died without deleting theirs go once a day out of date, when a
    worker starts; a later beat leaves them."""
    store.beat_worker("dead", ["refund"], ttl=30, first=True)
    store.beat_worker("recent", ["refund"], ttl=30, first=True)
    clock.advance(KEEP_DEAD + 31)
    store.beat_worker("recent", ["refund"], ttl=30)
    store.beat_worker("other", [], ttl=30)
    assert store.live_workers()[0].worker_id == "recent"

    def ids() -> set[str]:
        rows = store._transact(lambda tx: tx.all("live_workers", now=0.0), write=False)
        return {r["worker_id"] for r in rows}

    assert ids() == {"dead", "recent", "other"}
    store.beat_worker("starting", [], ttl=30, first=True)
    assert ids() == {"recent", "other", "starting"}


def test_a_worker_beats_as_it_sweeps_and_forgets_itself_as_it_stops(db_url: str) -> None:
    """A worker that runs background runs is listed with its workflows while it runs, and not
    once it has stopped; one without workflows is listed with none."""
    app = longcall.App(db_url)

    @app.workflow("refund")
    def refund(order: dict[str, Any]) -> dict[str, Any]:
        return order

    async def main() -> tuple[list[Any], list[Any]]:
        worker = app.worker(sweep_interval=0.05)
        running = asyncio.create_task(worker.run(handle_signals=False))
        for _ in range(200):
            seen = await app.in_thread(app.store.live_workers)
            if seen:
                break
            await asyncio.sleep(0.01)
        worker.stop()
        await running
        return seen, await app.in_thread(app.store.live_workers)

    try:
        seen, after = asyncio.run(main())
        assert [w.workflows for w in seen] == [("refund",)]
        assert seen[0].expires_at - seen[0].heartbeat_at == pytest.approx(30)
        assert after == []
        loops = app.worker(runs=False)
        loops.beat()
        assert [w.workflows for w in app.store.live_workers()] == [()]
    finally:
        app.close()
