"""The store refuses values no database can keep at once, the same way on both backends.

An id over its bound, or a NUL in any string, raises :class:`~longcall.InvalidValue` before
any SQL runs, instead of PostgreSQL refusing an index entry that is too large (which used to
be retried for a minute) or a NUL it cannot compare. Nothing is written, and the retry path
is not taken (``store.retries.retried`` stays put).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from longcall import CallIds, InvalidValue, JobNotFound
from longcall.core.ids import STORE_MAX_BYTES
from longcall.store import NewJob, Store

FOUR_BYTES = "\U0001f600"  # 4 bytes in UTF-8: the worst case for a byte bound
HUGE = FOUR_BYTES * 1000  # 4,000 bytes: over every index entry PostgreSQL keeps


def new_job(job_id: str = "j1", **ids: str) -> NewJob:
    return NewJob(job_id, "export", {}, CallIds(**ids), None)


def refused_at_once(store: Store, operation: Callable[[], Any]) -> InvalidValue:
    """Run ``operation``; it must raise InvalidValue well inside a second, with no retry."""
    retried = store.retries.retried
    started = time.monotonic()
    with pytest.raises(InvalidValue) as caught:
        operation()
    took = time.monotonic() - started
    assert took < 1.0, f"took {took:.2f} s: retried?"
    assert store.retries.retried == retried, "the retry path was taken"
    assert store.retries.trouble() is None
    return caught.value


@pytest.mark.parametrize(
    ("label", "ids"),
    [
        ("job_id", {"job_id": HUGE}),
        ("session_id", {"session_id": HUGE, "call_id": "c1"}),
        ("call_id", {"session_id": "s1", "call_id": HUGE}),
        ("user_id", {"user_id": HUGE}),
        ("app_name", {"app_name": HUGE}),
    ],
)
def test_an_oversize_id_is_refused_before_any_sql(
    store: Store, label: str, ids: dict[str, str]
) -> None:
    """A 4,000-byte id: InvalidValue naming it, at once, and no job is stored."""
    ids = dict(ids)  # the parameters are shared by both backends' runs
    job_id = ids.pop("job_id", "j1")
    refused = refused_at_once(
        store, lambda: store.create_job(new_job(job_id, **ids), holder="t", dispatch_lease=60)
    )
    assert refused.field == label and not refused.nul
    assert "bytes" in str(refused)
    if job_id == "j1":
        with pytest.raises(JobNotFound):
            store.get_job("j1")


def test_an_oversize_tool_name_is_refused(store: Store) -> None:
    """The tool name is indexed with nothing, but bounded all the same."""
    new = NewJob("j1", HUGE, {}, CallIds(), None)
    refused = refused_at_once(store, lambda: store.create_job(new, holder="t", dispatch_lease=60))
    assert refused.field == "tool_name"


def test_ids_at_the_bound_are_kept(store: Store) -> None:
    """An id of exactly its byte bound is stored and found again: the bound is not too tight."""
    job_id = "j" * STORE_MAX_BYTES["job_id"]
    session = "s" * STORE_MAX_BYTES["session_id"]
    call = "c" * STORE_MAX_BYTES["call_id"]
    _, created = store.create_job(
        new_job(job_id, session_id=session, call_id=call), holder="t", dispatch_lease=60
    )
    assert created and store.get_job(job_id).session_id == session


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.get_job("a\x00b"),
        lambda s: s.list_jobs(tool_name="a\x00b"),
        lambda s: s.list_jobs(session_id="a\x00b"),
        lambda s: s.create_job(new_job("a\x00b"), holder="t", dispatch_lease=60),
        lambda s: s.create_job(
            new_job("j1", session_id="s\x00", call_id="c"), holder="t", dispatch_lease=60
        ),
        lambda s: s.get_run("run-\x00"),
        lambda s: s.session_events("s\x00"),
    ],
    ids=["get_job", "list_by_tool", "list_by_session", "create", "create_session", "run", "events"],
)
def test_a_nul_is_refused_before_any_sql(store: Store, operation: Any) -> None:
    """A NUL in any id: InvalidValue with ``nul`` set, at once, on SQLite as on PostgreSQL."""
    refused = refused_at_once(store, lambda: operation(store))
    assert refused.nul


def test_an_oversize_webhook_id_is_refused_before_any_sql(store: Store) -> None:
    """A delivery whose id is too long to index: refused, and the job is not touched."""
    store.create_job(new_job("j1"), holder="t", dispatch_lease=60)
    refused = refused_at_once(
        store,
        lambda: store.ingest(
            source="batch", delivery_id=HUGE, job_id="j1", kind="complete", payload={"ok": 1}
        ),
    )
    assert refused.field == "delivery_id"
    assert store.get_job("j1").state.value == "started"


@pytest.mark.postgres
def test_postgres_data_errors_are_not_retried(pg_url: str) -> None:
    """A value only PostgreSQL refuses (jsonb cannot hold \\u0000): InvalidValue at once."""
    from longcall import App

    app = App(pg_url)
    try:
        store = app.store
        new = NewJob("j1", "export", {"text": "a\x00b"}, CallIds(), None)
        refused = refused_at_once(
            store, lambda: store.create_job(new, holder="t", dispatch_lease=60)
        )
        assert "PostgreSQL" in str(refused)
        with pytest.raises(JobNotFound):
            store.get_job("j1")
    finally:
        app.close()


def test_postgres_errors_are_sorted_into_transient_and_not() -> None:
    """Only errors that can pass are retried: races, shutdowns, lost connections."""
    pytest.importorskip("psycopg")
    from psycopg import errors as pg

    from longcall.store.postgres import refused, transient

    for passing in (
        pg.SerializationFailure,
        pg.DeadlockDetected,
        pg.AdminShutdown,
        pg.CrashShutdown,
        pg.CannotConnectNow,
        pg.TooManyConnections,
        pg.ConnectionFailure,
    ):
        assert transient(passing("x")), passing
    for lasting in (
        pg.ProgramLimitExceeded,
        pg.StringDataRightTruncation,
        pg.UntranslatableCharacter,
        pg.CheckViolation,
        pg.UndefinedTable,
        pg.DiskFull,
    ):
        assert not transient(lasting("x")), lasting
    assert isinstance(refused(pg.ProgramLimitExceeded("index row too big")), InvalidValue)
    assert isinstance(refused(pg.UntranslatableCharacter("x")), InvalidValue)
    assert not isinstance(refused(pg.UndefinedTable("x")), InvalidValue)
