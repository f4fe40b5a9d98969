"""Listings, searches and job counts whose cost does not grow with the table (schema 14).

A listing sends only the filters it was given, so each can use the index that fits; a search
page reads a bounded window of jobs and says where the next one goes on; the counts the
metrics show are kept by triggers as jobs change, also under concurrent writers.
"""

from __future__ import annotations

import random
import sqlite3
import threading
from typing import Any

import psycopg
import pytest

from longcall.core.clock import FakeClock
from longcall.core.jobs import CallIds, Delivery, JobState
from longcall.store import NewJob, Store, open_store
from longcall.store.queries import as_sent, queries, with_filters


def create(
    store: Store, job_id: str, *, user: str = "u", tool: str = "export", **args: Any
) -> None:
    new = NewJob(job_id, tool, args, CallIds(user_id=user), None)
    _, created = store.create_job(new, holder="tool", dispatch_lease=60.0)
    assert created
    store.finish_dispatch(job_id, None)


def counted_directly(store: Store) -> dict[tuple[str, str], int]:
    """The counts as a scan of the table finds them: what the triggers must agree with."""
    sql = "SELECT state, delivery, COUNT(*) AS n FROM lc_jobs GROUP BY state, delivery"
    rows = store._transact(lambda tx: tx_rows(tx, sql), write=False)
    return {(r[0], r[1]): int(r[2]) for r in rows}


def tx_rows(tx: Any, sql: str) -> list[tuple[Any, ...]]:
    conn = tx._conn
    if isinstance(conn, sqlite3.Connection):
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        return list(cur.execute(sql).fetchall())


# -- the statements a listing sends ---------------------------------------------------------


def test_a_listing_sends_only_the_filters_it_was_given() -> None:
    """An absent filter leaves no condition behind (SQLite plans `:x IS NULL OR ...` as a scan
    of the whole table), a given one loses only its mark, and a filter of several lines goes
    or stays whole."""
    sql = "SELECT 1\n  /*if a*/ AND a = :a\n  /*if b*/ AND (b = :b\n  /*if b*/ OR c = :b)\nLIMIT 1"
    assert with_filters(sql, frozenset()) == "SELECT 1\nLIMIT 1"
    assert with_filters(sql, frozenset({"a"})) == "SELECT 1\n   AND a = :a\nLIMIT 1"
    assert with_filters(sql, frozenset({"b"})) == "SELECT 1\n   AND (b = :b\n   OR c = :b)\nLIMIT 1"
    assert "/*if" not in as_sent(queries("sqlite")["list_jobs"], {"state": "started", "limit": 5})


def plan_of(store: Store, query: str, **params: Any) -> str:
    """SQLite's plan for a named query as the store would send it."""
    conn = sqlite3.connect(store.path)  # type: ignore[attr-defined]
    try:
        sql = as_sent(queries("sqlite")[query], params)
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    finally:
        conn.close()
    return "\n".join(r[-1] for r in rows)


LISTING = dict.fromkeys(
    ("state", "tool_name", "session_id", "user_id", "delivery", "pattern", "before_created"),
    None,
) | {"before_id": None, "limit": 100}


@pytest.mark.parametrize(
    ("given", "index"),
    [
        ({}, "lc_jobs_created"),
        ({"user_id": "u"}, "lc_jobs_user_created"),
        ({"state": "started"}, "lc_jobs_state_created"),
        ({"tool_name": "export"}, "lc_jobs_tool_created"),
        ({"session_id": "s"}, "lc_jobs_session_created"),
        ({"user_id": "u", "before_created": 5.0, "before_id": "j"}, "lc_jobs_user_created"),
    ],
)
def test_each_sqlite_listing_walks_an_index_newest_first(
    sqlite_url: str, given: dict[str, Any], index: str
) -> None:
    """No listing reads the whole table or sorts it: each walks the index of its filter in
    order and stops at its limit."""
    store = open_store(sqlite_url, FakeClock())
    store.migrate()
    try:
        plan = plan_of(store, "list_jobs", **(LISTING | given))
        window = plan_of(store, "search_jobs", **(LISTING | given | {"pattern": "%x%"}), window=9)
    finally:
        store.close()
    # The listing: read from the index in its order, never sorted. The search: its window read
    # the same way; what it sorts is that window, at most `window` rows.
    assert index in plan and "TEMP B-TREE" not in plan, plan
    assert index in window, window
    for got in (plan, window):
        assert "SCAN lc_jobs" not in got.splitlines(), got


# -- searching a window at a time ------------------------------------------------------------


def test_a_search_page_reads_a_window_and_says_where_the_next_goes_on(
    store: Store, clock: FakeClock
) -> None:
    """Matches spread over 25 jobs, searched 10 jobs at a time: each page holds the matches
    among the 10 it read, newest first, and a cursor at the last job it read; following the
    cursors finds every match once, in order, and the last page has no cursor."""
    for n in range(25):
        clock.advance(1)
        create(store, f"j{n:02}", note="needle" if n in (3, 4, 17, 24) else "hay")
    found, pages, before = [], 0, None
    while True:
        page = store.page_jobs(text="NEEDLE", before=before, limit=5, window=10)
        pages += 1
        found += [j.job_id for j in page.jobs]
        if page.next is None:
            break
        before = page.next
    assert found == ["j24", "j17", "j04", "j03"]
    assert pages == 3  # 10 + 10 + 5 jobs read: the third window was not full


def test_a_search_page_that_fills_its_limit_goes_on_after_its_last_match(
    store: Store, clock: FakeClock
) -> None:
    for n in range(12):
        clock.advance(1)
        create(store, f"j{n:02}", note="needle")
    page = store.page_jobs(text="needle", limit=3, window=100)
    assert [j.job_id for j in page.jobs] == ["j11", "j10", "j09"]
    assert page.next == (page.jobs[-1].created_at, "j09")
    rest = store.page_jobs(text="needle", before=page.next, limit=100, window=100)
    assert [j.job_id for j in rest.jobs] == [f"j{n:02}" for n in range(8, -1, -1)]
    assert rest.next is None


def test_a_search_keeps_to_the_users_jobs_and_the_other_filters(
    store: Store, clock: FakeClock
) -> None:
    for n in range(20):
        clock.advance(1)
        create(store, f"j{n:02}", user="ann" if n % 2 else "bob", note="needle")
    page = store.page_jobs(text="needle", user_id="ann", limit=50, window=4)
    assert [j.job_id for j in page.jobs] == ["j19", "j17", "j15", "j13"]
    assert page.next is not None
    assert {j.user_id for j in store.page_jobs(user_id="bob", limit=50).jobs} == {"bob"}


def test_a_plain_listing_page_has_a_cursor_only_when_it_is_full(
    store: Store, clock: FakeClock
) -> None:
    for n in range(4):
        clock.advance(1)
        create(store, f"j{n}")
    full = store.page_jobs(limit=4)
    assert full.next == (full.jobs[-1].created_at, "j0")
    assert store.page_jobs(limit=5).next is None
    assert [j.job_id for j in store.page_jobs(state=JobState.STARTED, limit=9).jobs] == [
        "j3",
        "j2",
        "j1",
        "j0",
    ]


# -- counts kept as jobs change --------------------------------------------------------------


def test_the_counts_follow_every_change_of_state_and_delivery(store: Store) -> None:
    create(store, "a")
    create(store, "b")
    create(store, "c")
    assert store.counts() == {("started", "none"): 3}
    store.finish("a", JobState.SUCCEEDED, {})
    store.finish("b", JobState.FAILED, {})
    store.attach("c", CallIds(session_id="s", call_id="k", user_id="u"))
    store.finish("c", JobState.SUCCEEDED, {})
    store.fold_counts()
    assert store.counts() == counted_directly(store)
    assert sum(store.counts().values()) == 3
    assert ("started", "none") not in store.counts()  # a count that reached 0 is not shown


@pytest.mark.postgres
def test_counts_under_concurrent_writers_and_folds_match_a_scan(pg_url: str) -> None:
    """Four threads create and finish jobs while a fifth folds the counts over and over: at
    every point the counts read agree with what has committed, and at the end with a scan."""
    store = open_store(pg_url, FakeClock())
    try:
        stop = threading.Event()
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            rng = random.Random(worker)
            try:
                for n in range(60):
                    job_id = f"w{worker}-{n}"
                    create(store, job_id, user=f"u{worker}")
                    if rng.random() < 0.7:
                        state = rng.choice([JobState.SUCCEEDED, JobState.FAILED])
                        store.finish(job_id, state, {})
            except BaseException as exc:
                errors.append(exc)

        def fold() -> None:
            try:
                while not stop.is_set():
                    store.fold_counts()
                    assert sum(store.counts().values()) <= 240
            except BaseException as exc:
                errors.append(exc)

        folder = threading.Thread(target=fold)
        folder.start()
        writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        folder.join()
        assert not errors, errors
        assert store.counts() == counted_directly(store)
        assert sum(store.counts().values()) == 240
        store.fold_counts()
        assert store.counts() == counted_directly(store)
    finally:
        store.close()


def test_deleting_a_job_takes_it_out_of_the_counts(store: Store) -> None:
    create(store, "a")
    create(store, "b")
    store._transact(lambda tx: tx_delete(tx, "a"))
    store.fold_counts()
    assert store.counts() == {("started", "none"): 1} == counted_directly(store)


def tx_delete(tx: Any, job_id: str) -> None:
    conn = tx._conn
    if isinstance(conn, sqlite3.Connection):
        conn.execute("DELETE FROM lc_jobs WHERE job_id = ?", (job_id,))
    else:
        conn.execute("DELETE FROM lc_jobs WHERE job_id = %s", (job_id,))


def test_delivery_is_counted_too(store: Store, clock: FakeClock) -> None:
    create(store, "a")
    store.attach("a", CallIds(session_id="s", call_id="k", user_id="u"))
    store.finish("a", JobState.SUCCEEDED, {})
    assert store.counts() == {("succeeded", Delivery.READY.value): 1}
