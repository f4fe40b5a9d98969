"""A run joins the delivery holding its session only when it answers exactly calls that
delivery claimed, under the lease's live holder and fence; anything else waits."""

from __future__ import annotations

import pytest

from longcall import App, CallIds, JobState, SessionKey
from longcall.core.clock import FakeClock
from longcall.store import NewJob, Store
from longcall.store import queries as sql

APP, USER, SESSION = "reports", "ana", "s1"
KEY = SessionKey(APP, USER, SESSION)
LEASE = 30.0


def ready(store: Store, job_id: str, call_id: str, *, tool: str = "start_report") -> None:
    """A finished job of the session's call ``call_id``, waiting for the deliverer."""
    ids = CallIds(APP, USER, SESSION, call_id, "inv-1")
    store.create_job(NewJob(job_id, tool, {}, ids, None), holder="tool", dispatch_lease=60)
    store.finish_dispatch(job_id, None)
    store.finish(job_id, JobState.SUCCEEDED, {"rows": 3})


def join(store: Store, answers: set[str], holder: str = "turn") -> str | None:
    return store.take_or_join_session(KEY, holder, kind="turn", ttl=60, answers=answers)


def test_a_free_session_is_taken_whatever_the_message(store: Store) -> None:
    """With nobody holding the session the run takes its lease, answers or not."""
    assert join(store, {"call-1"}) == "taken"
    assert join(store, set(), holder="turn") == "taken"  # its own lease, renewed


def test_the_deliverys_own_answers_join_its_lease(store: Store) -> None:
    """Answers to calls the live delivery claimed join; the lease stays the deliverer's."""
    ready(store, "j1", "call-1")
    ready(store, "j2", "call-2")
    assert len(store.claim("deliverer", limit=10, lease=LEASE, app_name=APP)) == 2
    assert join(store, {"call-1", "call-2"}) == "joined"
    assert join(store, {"call-2"}) == "joined"  # one message of the claim
    assert store.take_session(KEY, "turn", kind="turn", ttl=60) is False


def test_anything_but_exactly_the_claimed_calls_waits(store: Store) -> None:
    """Text, a call the delivery does not hold (an open call of the session among them), or
    a claimed call beside another: busy."""
    ready(store, "j1", "call-1")
    ids = CallIds(APP, USER, SESSION, "call-open", "inv-2")
    store.create_job(NewJob("open", "start_report", {}, ids, None), holder="t", dispatch_lease=60)
    store.claim("deliverer", limit=10, lease=LEASE, app_name=APP)
    assert join(store, set()) is None
    assert join(store, {"call-9"}) is None
    assert join(store, {"call-open"}) is None
    assert join(store, {"call-1", "call-9"}) is None


def test_a_user_turns_lease_is_joined_by_nobody(store: Store) -> None:
    """A session held by a user turn is busy for a message answering its open calls too."""
    ready(store, "j1", "call-1")
    assert store.take_session(KEY, "a-turn", kind="turn", ttl=60) is True
    assert join(store, {"call-1"}) is None


def test_a_lapsed_or_finished_delivery_is_joined_by_nobody(store: Store, clock: FakeClock) -> None:
    """Once the delivery marked its jobs delivered, or its lease ran out and another took
    the session, its calls join nothing."""
    ready(store, "j1", "call-1")
    [job] = store.claim("deliverer", limit=10, lease=LEASE, app_name=APP)
    assert store.mark_delivered_batch([([job], None)], "deliverer", throttle=0) == [1]
    assert join(store, {"call-1"}) is None  # delivered, lease still held
    ready(store, "j2", "call-2")
    store.release_session(KEY, "deliverer")
    assert store.claim("deliverer", limit=10, lease=LEASE, app_name=APP)
    clock.advance(LEASE + 1)
    assert join(store, {"call-2"}) == "taken"  # ran out: a turn takes it


def test_another_sessions_delivery_is_not_joined(store: Store) -> None:
    """The same call ids held by a delivery into another user's session join nothing here."""
    ids = CallIds(APP, "bo", SESSION, "call-1", "inv-1")
    store.create_job(NewJob("j1", "start_report", {}, ids, None), holder="t", dispatch_lease=60)
    store.finish_dispatch("j1", None)
    store.finish("j1", JobState.SUCCEEDED, {})
    store.claim("deliverer", limit=10, lease=LEASE, app_name=APP)
    assert store.take_session(KEY, "other-turn", kind="turn", ttl=60) is True
    assert join(store, {"call-1"}) is None


@pytest.mark.postgres
def test_the_join_finds_the_jobs_by_session_and_call_without_statistics(pg_url: str) -> None:
    """On a database without statistics the claimed calls are looked up by the (session_id,
    call_id) index, not by reading every ready job: a backlog does not slow user turns."""
    App(pg_url).close()
    text = sql.queries("postgres")["session_delivery_calls"]
    params = {"app_name": "a", "user_id": "u", "session_id": "s", "now": None}
    params["call_ids"] = '["c1"]'
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(f"EXPLAIN {text}", params).fetchall()
    got = "\n".join(str(row[0]) for row in rows)
    assert "lc_jobs_call" in got and "lc_jobs_ready" not in got, got
