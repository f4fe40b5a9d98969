"""One conformance suite for the store: every operation, and what repeating it does.

Each test runs on SQLite and on PostgreSQL (the ``db_url`` fixture). The store gets a
:class:`~longcall.FakeClock`, which is authoritative, so both databases compare leases,
deadlines and throttles with the fake time and the tests never sleep.
"""

from __future__ import annotations

from typing import Any

import pytest

from longcall import (
    AttachConflict,
    CallIds,
    Delivery,
    FakeClock,
    Job,
    JobNotFound,
    JobState,
    LongcallError,
    SessionKey,
)
from longcall.store import NewJob, Store

LEASE = 30.0
THROTTLE = 10.0


def create(
    store: Store,
    job_id: str,
    *,
    tool_name: str = "export",
    args: dict[str, Any] | None = None,
    deadline: float | None = None,
    holder: str = "tool",
    dispatch_lease: float = 60.0,
    **ids: str,
) -> tuple[Job, bool]:
    new = NewJob(job_id, tool_name, args or {}, CallIds(**ids), deadline)
    return store.create_job(new, holder=holder, dispatch_lease=dispatch_lease)


def started(store: Store, job_id: str, **ids: str) -> Job:
    """A created job whose work was submitted (no outbox row left)."""
    job, created = create(store, job_id, **ids)
    assert created
    store.finish_dispatch(job_id, None)
    return job


def key(session_id: str) -> SessionKey:
    """The lease key of a session of jobs that name no app and no user."""
    return SessionKey("", "", session_id)


def ready(store: Store, job_id: str, session: str = "s1", call: str | None = None) -> Job:
    """An attached job with a result, waiting for the resumer."""
    started(store, job_id, session_id=session, call_id=call or f"call-{job_id}")
    outcome = store.finish(job_id, JobState.SUCCEEDED, {"job": job_id})
    assert outcome.job.delivery is Delivery.READY
    return outcome.job


def kinds(store: Store, job_id: str) -> list[str]:
    return [e.kind for e in store.job_events(job_id)]


# -- create-if-absent and the dispatch outbox --------------------------------------------


def test_create_job_records_a_started_job(store: Store, clock: FakeClock) -> None:
    """A new job is started, undelivered, and carries its tool, arguments, ids and deadline."""
    job, created = create(
        store,
        "j1",
        args={"fmt": "csv", "rows": [1, 2]},
        deadline=2700,
        app_name="app",
        user_id="u",
        session_id="s",
        call_id="c",
        invocation_id="i",
    )
    assert created is True
    assert job.state is JobState.STARTED
    assert job.delivery is Delivery.NONE
    assert job.tool_name == "export"
    assert job.args == {"fmt": "csv", "rows": [1, 2]}
    assert job.ids == CallIds("app", "u", "s", "c", "i")
    assert job.deadline_at == clock.now() + 2700
    assert job.created_at == job.updated_at == clock.now()
    assert (job.result, job.progress, job.finished_at, job.delivered_at) == (None,) * 4
    assert (job.attempts, job.progress_seq, job.claim_holder) == (0, 0, None)
    assert store.get_job("j1") == job


def test_create_job_without_deadline_has_none(store: Store) -> None:
    """A job created without a deadline has no deadline_at and is never overdue."""
    job, _ = create(store, "j1")
    assert job.deadline_at is None
    assert store.overdue(10) == []


def test_create_job_again_returns_the_original_row(store: Store, clock: FakeClock) -> None:
    """The same id returns created=False and the first row, whatever the second call passes."""
    first, created = create(store, "j1", args={"fmt": "csv"}, session_id="s")
    assert created
    clock.advance(5)
    again, created_again = create(
        store, "j1", tool_name="other", args={"fmt": "pdf"}, deadline=10, session_id="t"
    )
    assert created_again is False
    assert again == first
    assert len(store.list_jobs()) == 1
    clock.advance(60)
    assert [i.job_id for i in store.claim_outbox("worker", limit=10, lease=LEASE)] == ["j1"]


def test_dispatch_row_is_held_until_the_dispatch_lease_passes(
    store: Store, clock: FakeClock
) -> None:
    """A new job's dispatch outbox row stays with its creator until the lease passes."""
    create(store, "j1", args={"fmt": "csv"}, dispatch_lease=60)
    assert store.claim_outbox("worker", limit=10, lease=LEASE) == []
    clock.advance(59)
    assert store.claim_outbox("worker", limit=10, lease=LEASE) == []
    clock.advance(1)
    items = store.claim_outbox("worker", limit=10, lease=LEASE)
    assert len(items) == 1
    item = items[0]
    assert (item.job_id, item.kind, item.tool_name, item.args, item.attempts) == (
        "j1",
        "dispatch",
        "export",
        {"fmt": "csv"},
        1,
    )
    # Claimed: another worker sees nothing until this claim's lease runs out.
    assert store.claim_outbox("other", limit=10, lease=LEASE) == []
    clock.advance(LEASE)
    again = store.claim_outbox("other", limit=10, lease=LEASE)
    assert [(i.job_id, i.attempts) for i in again] == [("j1", 2)]


def test_finish_dispatch_removes_the_row_and_keeps_the_message(
    store: Store, clock: FakeClock
) -> None:
    """finish_dispatch drops the outbox row and stores the first pending message only."""
    create(store, "j1")
    store.finish_dispatch("j1", "Export started; about 20 minutes.")
    assert store.get_job("j1").pending_message == "Export started; about 20 minutes."
    store.finish_dispatch("j1", "a different message")
    assert store.get_job("j1").pending_message == "Export started; about 20 minutes."
    clock.advance(3600)
    assert store.claim_outbox("worker", limit=10, lease=LEASE) == []


def test_retry_outbox_puts_the_item_back_after_a_delay(store: Store, clock: FakeClock) -> None:
    """A failed submission returns to the outbox after the delay and is logged on the job."""
    create(store, "j1", dispatch_lease=0)
    [item] = store.claim_outbox("worker", limit=10, lease=LEASE)
    store.retry_outbox(item, "worker", error="503 from upstream", delay=20)
    clock.advance(19)
    assert store.claim_outbox("worker", limit=10, lease=LEASE) == []
    clock.advance(1)
    assert [i.attempts for i in store.claim_outbox("worker", limit=10, lease=LEASE)] == [2]
    [event] = store.job_events("j1")
    assert (event.kind, event.data) == (
        "dispatch_error",
        {"error": "503 from upstream", "attempt": 1},
    )


def test_abandon_job_deletes_only_a_started_job_with_dispatch_outstanding(
    store: Store, clock: FakeClock
) -> None:
    """abandon_job deletes a job whose dispatch is outstanding, and nothing else."""
    create(store, "outstanding")
    assert store.abandon_job("outstanding") is True
    with pytest.raises(JobNotFound):
        store.get_job("outstanding")
    assert store.abandon_job("outstanding") is False

    started(store, "submitted")
    assert store.abandon_job("submitted") is False
    assert store.get_job("submitted").state is JobState.STARTED

    create(store, "completed")
    store.finish("completed", JobState.SUCCEEDED, 1)
    assert store.abandon_job("completed") is False
    assert store.get_job("completed").result == 1

    clock.advance(3600)
    # The abandoned job's outbox row went with it; the completed one's is still there.
    assert [i.job_id for i in store.claim_outbox("worker", limit=10, lease=LEASE)] == ["completed"]


def test_create_job_for_a_call_another_job_has_creates_nothing(store: Store) -> None:
    """A second job for an already-mapped (session, call) is refused with a longcall error."""
    started(store, "j1", session_id="s", call_id="c")
    with pytest.raises(LongcallError):
        create(store, "j2", session_id="s", call_id="c")
    assert [j.job_id for j in store.list_jobs()] == ["j1"]


# -- attach ------------------------------------------------------------------------------


def test_attach_fills_only_empty_columns(store: Store, clock: FakeClock) -> None:
    """attach fills the empty id columns and leaves the filled ones as they were."""
    started(store, "j1", app_name="app", user_id="u")
    clock.advance(3)
    job = store.attach("j1", CallIds(session_id="s", call_id="c", invocation_id="i"))
    assert job.ids == CallIds("app", "u", "s", "c", "i")
    assert job.updated_at == clock.now()
    assert job.delivery is Delivery.NONE  # still running: nothing to deliver
    assert store.get_job("j1") == job


def test_attach_again_is_a_no_op(store: Store, clock: FakeClock) -> None:
    """Repeating an attach (or attaching a subset of the ids) changes nothing, not even times."""
    started(store, "j1")
    first = store.attach("j1", CallIds(session_id="s", call_id="c"))
    clock.advance(3)
    assert store.attach("j1", CallIds(session_id="s", call_id="c")) == first
    assert store.attach("j1", CallIds(call_id="c")) == first
    assert store.attach("j1", CallIds()) == first
    assert store.get_job("j1") == first
    assert store.job_events("j1") == []


def test_conflicting_attach_is_refused_unchanged_and_logged(store: Store, clock: FakeClock) -> None:
    """A conflicting mapping raises AttachConflict, fills nothing, and logs attach_conflict."""
    started(store, "j1", session_id="s")
    before = store.get_job("j1")
    clock.advance(1)
    with pytest.raises(AttachConflict) as info:
        store.attach("j1", CallIds(session_id="other", call_id="c", user_id="u"))
    assert info.value.job_id == "j1"
    assert info.value.conflicts == {"session_id": ("s", "other")}
    assert store.get_job("j1") == before  # call_id and user_id were not filled either
    [event] = store.job_events("j1")
    assert (event.seq, event.kind, event.data) == (
        1,
        "attach_conflict",
        {"session_id": ["s", "other"]},
    )
    assert event.created_at == clock.now()


def test_two_jobs_cannot_take_the_same_call(store: Store) -> None:
    """Attaching a second job to a (session, call) another job has raises and changes nothing."""
    started(store, "j1")
    started(store, "j2")
    store.attach("j1", CallIds(session_id="s", call_id="c"))
    before = store.get_job("j2")
    with pytest.raises(AttachConflict):
        store.attach("j2", CallIds(session_id="s", call_id="c"))
    assert store.get_job("j2") == before
    # The same call id in another session is a different call.
    assert store.attach("j2", CallIds(session_id="s2", call_id="c")).attached


def test_attach_unknown_job(store: Store) -> None:
    """Attaching an unknown job id raises JobNotFound."""
    with pytest.raises(JobNotFound):
        store.attach("nope", CallIds(session_id="s", call_id="c"))


# -- progress ----------------------------------------------------------------------------


def test_progress_appends_to_the_event_log_with_increasing_sequence(
    store: Store, clock: FakeClock
) -> None:
    """Each progress update is a logged event with the next sequence; the latest is kept."""
    started(store, "j1")
    seqs = []
    for percent in (10, 40, 90):
        clock.advance(1)
        job = store.progress("j1", {"percent": percent}, notify=False, throttle=THROTTLE)
        assert job is not None
        seqs.append(job.progress_seq)
    assert seqs == [1, 2, 3]
    job = store.get_job("j1")
    assert job.progress == {"percent": 90}
    assert (job.notify_seq, job.delivery) == (0, Delivery.NONE)
    events = store.job_events("j1")
    assert [(e.seq, e.kind) for e in events] == [(1, "progress"), (2, "progress"), (3, "progress")]
    assert events[1].data == {"data": {"percent": 40}, "notifyModel": False}
    assert events[2].created_at == clock.now()
    assert [e.seq for e in store.job_events("j1", after=1)] == [2, 3]


def test_quiet_progress_never_makes_a_job_ready(store: Store, clock: FakeClock) -> None:
    """Progress with notify=False leaves an attached job undelivered and unclaimable."""
    started(store, "j1", session_id="s", call_id="c")
    for n in range(3):
        job = store.progress("j1", n, notify=False, throttle=THROTTLE)
        assert job is not None and job.delivery is Delivery.NONE
    clock.advance(3600)
    assert store.claim("r", limit=10, lease=LEASE) == []


def test_notifying_progress_makes_an_attached_job_ready(store: Store, clock: FakeClock) -> None:
    """Progress with notify=True makes an attached started job ready at once."""
    started(store, "j1", session_id="s", call_id="c")
    job = store.progress("j1", {"step": "half"}, notify=True, throttle=THROTTLE)
    assert job is not None
    assert job.delivery is Delivery.READY
    assert job.available_at == clock.now()
    assert job.notify_seq == job.progress_seq == 1
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    assert (claimed.job_id, claimed.state, claimed.progress) == (
        "j1",
        JobState.STARTED,
        {"step": "half"},
    )


def test_notifying_progress_before_attach_waits_for_the_ids(store: Store) -> None:
    """A notifying update on an unattached job makes it ready only once attach gives both ids."""
    started(store, "j1")
    job = store.progress("j1", "half", notify=True, throttle=THROTTLE)
    assert job is not None and job.delivery is Delivery.NONE
    assert store.attach("j1", CallIds(session_id="s")).delivery is Delivery.NONE
    assert store.attach("j1", CallIds(call_id="c")).delivery is Delivery.READY


def test_progress_announcements_are_throttled(store: Store, clock: FakeClock) -> None:
    """After a progress delivery the next announcement waits until the throttle has passed."""
    started(store, "j1", session_id="s", call_id="c")
    store.progress("j1", 1, notify=True, throttle=THROTTLE)
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    assert store.mark_delivered(claimed, "r", throttle=THROTTLE) is True
    store.release_session(key("s"), "r")
    quiet = store.get_job("j1")
    assert (quiet.delivery, quiet.notified_seq, quiet.claim_holder) == (Delivery.NONE, 1, None)

    clock.advance(2)
    job = store.progress("j1", 2, notify=True, throttle=THROTTLE)
    assert job is not None
    assert job.delivery is Delivery.READY
    assert job.available_at == clock.now() - 2 + THROTTLE
    # A third update while the second waits folds into the same announcement.
    job = store.progress("j1", 3, notify=True, throttle=THROTTLE)
    assert job is not None and job.available_at == clock.now() - 2 + THROTTLE
    clock.advance(THROTTLE - 2 - 0.5)
    assert store.claim("r", limit=10, lease=LEASE) == []
    clock.advance(0.5)
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    assert (claimed.progress, claimed.notify_seq) == (3, 3)


def test_newer_progress_during_a_progress_delivery_is_announced_later(
    store: Store, clock: FakeClock
) -> None:
    """Progress that arrives while an announcement is being delivered is announced after it."""
    started(store, "j1", session_id="s", call_id="c")
    store.progress("j1", 1, notify=True, throttle=THROTTLE)
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    store.progress("j1", 2, notify=True, throttle=THROTTLE)
    assert store.mark_delivered(claimed, "r", throttle=THROTTLE) is True
    job = store.get_job("j1")
    assert (job.delivery, job.notified_seq, job.notify_seq) == (Delivery.READY, 1, 2)
    assert job.available_at == clock.now() + THROTTLE


def test_progress_on_a_terminal_job_returns_none_and_changes_nothing(store: Store) -> None:
    """Progress after the job finished returns None and neither logs nor changes anything."""
    started(store, "j1")
    store.progress("j1", "half", notify=False, throttle=THROTTLE)
    store.finish("j1", JobState.SUCCEEDED, "done")
    before, events = store.get_job("j1"), store.job_events("j1")
    assert store.progress("j1", "late", notify=True, throttle=THROTTLE) is None
    assert store.get_job("j1") == before
    assert store.job_events("j1") == events
    assert before.progress == "half"


def test_progress_on_an_unknown_job(store: Store) -> None:
    """Progress for an unknown job id raises JobNotFound."""
    with pytest.raises(JobNotFound):
        store.progress("nope", 1, notify=False, throttle=THROTTLE)


# -- finish ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state", [JobState.SUCCEEDED, JobState.FAILED, JobState.EXPIRED, JobState.CANCELLED]
)
def test_first_terminal_result_wins(store: Store, clock: FakeClock, state: JobState) -> None:
    """The first terminal update changes the job; later ones keep it and are logged as ignored."""
    started(store, "j1")
    clock.advance(7)
    first = store.finish("j1", state, {"n": 1})
    assert first.changed is True
    assert (first.job.state, first.job.result) == (state, {"n": 1})
    assert first.job.finished_at == first.job.updated_at == clock.now()

    clock.advance(1)
    for later_state in (JobState.SUCCEEDED, JobState.FAILED):
        later = store.finish("j1", later_state, {"n": 2})
        assert later.changed is False
        assert later.job == first.job
    assert store.get_job("j1") == first.job
    events = store.job_events("j1")
    assert [(e.seq, e.kind) for e in events] == [(1, state.value), (2, "ignored"), (3, "ignored")]
    assert events[0].data == {"n": 1}
    assert events[1].data == {
        "state": "succeeded",
        "result": {"n": 2},
        "reason": f"already {state.value}",
    }


def test_finish_with_a_non_terminal_state_is_refused(store: Store) -> None:
    """finish(STARTED) raises ValueError and changes nothing."""
    started(store, "j1")
    with pytest.raises(ValueError, match="not a terminal state"):
        store.finish("j1", JobState.STARTED, None)
    assert store.get_job("j1").state is JobState.STARTED


def test_finish_an_unknown_job(store: Store) -> None:
    """Finishing an unknown job id raises JobNotFound."""
    with pytest.raises(JobNotFound):
        store.finish("nope", JobState.SUCCEEDED, 1)


def test_finish_with_request_cancel_queues_a_cancel_item(store: Store) -> None:
    """request_cancel queues one 'cancel' outbox item, due at once; a repeat queues none."""
    started(store, "j1")
    store.finish("j1", JobState.CANCELLED, {"message": "stop"}, request_cancel=True)
    store.finish("j1", JobState.CANCELLED, {"message": "stop"}, request_cancel=True)
    items = store.claim_outbox("worker", limit=10, lease=LEASE)
    assert [(i.job_id, i.kind, i.attempts) for i in items] == [("j1", "cancel", 1)]
    store.finish_outbox("j1", "cancel")
    assert store.claim_outbox("worker", limit=10, lease=3600) == []


def test_request_cancel_queues_nothing_for_a_job_without_a_cancel_hook(store: Store) -> None:
    """A job created without an on_cancel hook (cancel_hook=False) is cancelled or expired
    with request_cancel, and no 'cancel' outbox item is queued for it."""
    for job_id, state in (("j1", JobState.CANCELLED), ("j2", JobState.EXPIRED)):
        new = NewJob(job_id, "render", {}, CallIds(), None, cancel_hook=False)
        store.create_job(new, holder="h", dispatch_lease=0, dispatch=False)
        assert store.finish(job_id, state, {"message": "stop"}, request_cancel=True).changed
    assert store.claim_outbox("worker", limit=10, lease=LEASE) == []


def test_finish_of_an_attached_job_makes_it_ready(store: Store, clock: FakeClock) -> None:
    """A terminal update on an attached job makes it ready at once, and listeners hear of it."""
    heard: list[int] = []
    store.ready_listeners.append(lambda: heard.append(1))
    started(store, "j1", session_id="s", call_id="c")
    assert heard == []
    outcome = store.finish("j1", JobState.FAILED, {"error": "disk full"})
    assert (outcome.job.delivery, outcome.job.available_at) == (Delivery.READY, clock.now())
    assert heard == [1]
    store.finish("j1", JobState.SUCCEEDED, 1)
    assert heard == [1]


def test_job_completed_before_attach_is_ready_once_attach_gives_both_ids(
    store: Store, clock: FakeClock
) -> None:
    """A job finished before its call was recorded becomes ready when attach completes the join."""
    started(store, "j1")
    outcome = store.finish("j1", JobState.SUCCEEDED, {"rows": 3})
    assert outcome.job.delivery is Delivery.NONE
    clock.advance(60)
    assert store.claim("r", limit=10, lease=LEASE) == []
    assert store.attach("j1", CallIds(call_id="c")).delivery is Delivery.NONE
    job = store.attach("j1", CallIds(session_id="s"))
    assert (job.delivery, job.available_at) == (Delivery.READY, clock.now())
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    assert (claimed.job_id, claimed.result) == ("j1", {"rows": 3})


def test_finish_during_a_throttled_announcement_is_ready_at_once(
    store: Store, clock: FakeClock
) -> None:
    """A result arriving while a progress announcement waits out its throttle is due at once."""
    started(store, "j1", session_id="s", call_id="c")
    store.progress("j1", 1, notify=True, throttle=THROTTLE)
    [claimed] = store.claim("r", limit=10, lease=LEASE)
    store.mark_delivered(claimed, "r", throttle=THROTTLE)
    store.release_session(key("s"), "r")
    clock.advance(1)
    waiting = store.progress("j1", 2, notify=True, throttle=THROTTLE)
    assert waiting is not None and waiting.available_at == clock.now() - 1 + THROTTLE
    outcome = store.finish("j1", JobState.SUCCEEDED, "done")
    assert outcome.job.available_at == clock.now()
    [final] = store.claim("r", limit=10, lease=LEASE)
    assert (final.state, final.result) == (JobState.SUCCEEDED, "done")


# -- claim -------------------------------------------------------------------------------


def test_claim_takes_only_ready_jobs(store: Store, clock: FakeClock) -> None:
    """claim returns ready jobs only, with the holder, one attempt and the lease set."""
    ready(store, "ready", session="s1")
    started(store, "running", session_id="s2", call_id="c2")
    started(store, "unattached")
    store.finish("unattached", JobState.SUCCEEDED, 1)
    claimed = store.claim("r", limit=10, lease=LEASE)
    assert [j.job_id for j in claimed] == ["ready"]
    job = claimed[0]
    assert (job.claim_holder, job.attempts, job.available_at) == ("r", 1, clock.now() + LEASE)
    assert job.delivery is Delivery.READY
    assert store.get_job("ready") == job


def test_claim_waits_for_available_at(store: Store, clock: FakeClock) -> None:
    """A ready job released with a delay is not claimed before its time has come."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    assert store.release(job, "r", error=None, delay=20, delivery=Delivery.READY) is True
    store.release_session(key("s1"), "r")
    clock.advance(19)
    assert store.claim("r", limit=10, lease=LEASE) == []
    clock.advance(1)
    assert [j.job_id for j in store.claim("r", limit=10, lease=LEASE)] == ["j1"]


def test_claimed_job_is_invisible_until_the_lease_runs_out(store: Store, clock: FakeClock) -> None:
    """Another holder cannot claim a claimed job until its lease runs out; then it can, once."""
    ready(store, "j1")
    [first] = store.claim("a", limit=10, lease=LEASE)
    assert store.claim("b", limit=10, lease=LEASE) == []
    clock.advance(LEASE - 1)
    assert store.claim("b", limit=10, lease=LEASE) == []
    clock.advance(1)
    [second] = store.claim("b", limit=10, lease=LEASE)
    assert (second.job_id, second.claim_holder, second.attempts) == ("j1", "b", 2)
    assert store.claim("a", limit=10, lease=LEASE) == []
    # The first holder lost the claim: its delivery record is refused.
    assert store.mark_delivered(first, "a", throttle=THROTTLE) is False
    assert store.get_job("j1").delivery is Delivery.READY
    assert store.mark_delivered(second, "b", throttle=THROTTLE) is True


def test_claim_respects_limit_and_order(store: Store, clock: FakeClock) -> None:
    """claim takes at most ``limit`` jobs, the longest-waiting first."""
    for n, session in enumerate(["s1", "s2", "s3"]):
        ready(store, f"j{n}", session=session)
        clock.advance(1)
    assert [j.job_id for j in store.claim("r", limit=2, lease=LEASE)] == ["j0", "j1"]
    assert [j.job_id for j in store.claim("r2", limit=2, lease=LEASE)] == ["j2"]


def test_claim_takes_the_jobs_of_one_session_together(store: Store) -> None:
    """Ready jobs of one session go to one holder in one claim, under one session lease."""
    ready(store, "a1", session="s")
    ready(store, "a2", session="s")
    ready(store, "b1", session="t")
    claimed = store.claim("r", limit=10, lease=LEASE)
    assert sorted(j.job_id for j in claimed) == ["a1", "a2", "b1"]
    assert {j.claim_holder for j in claimed} == {"r"}


def test_session_leased_by_someone_else_blocks_its_jobs(store: Store, clock: FakeClock) -> None:
    """While a user turn holds the session's lease, its jobs are not claimed; others' are."""
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is True
    ready(store, "blocked", session="s")
    ready(store, "free", session="t")
    assert [j.job_id for j in store.claim("r", limit=10, lease=LEASE)] == ["free"]
    assert store.claim("r2", limit=10, lease=LEASE) == []
    store.release_session(key("s"), "turn")
    assert [j.job_id for j in store.claim("r2", limit=10, lease=LEASE)] == ["blocked"]


def test_expired_session_lease_no_longer_blocks(store: Store, clock: FakeClock) -> None:
    """A session lease that was not renewed stops blocking once its ttl has passed."""
    store.take_session(key("s"), "turn", kind="turn", ttl=60)
    ready(store, "j1", session="s")
    clock.advance(59)
    assert store.claim("r", limit=10, lease=LEASE) == []
    clock.advance(1)
    assert [j.job_id for j in store.claim("r", limit=10, lease=LEASE)] == ["j1"]


def test_claim_takes_the_session_lease(store: Store, clock: FakeClock) -> None:
    """A claim holds its session's lease: a user turn cannot start until it is released."""
    ready(store, "j1", session="s")
    store.claim("r", limit=10, lease=LEASE)
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is False
    assert store.take_session(key("s"), "r", kind="resume", ttl=LEASE) is True  # its own: renewed
    store.release_session(key("s"), "someone-else")  # not theirs: nothing happens
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is False
    store.release_session(key("s"), "r")
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is True


def test_renew_extends_the_claim_and_the_session_lease(store: Store, clock: FakeClock) -> None:
    """renew pushes the claim and the session lease out by another lease period."""
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    clock.advance(LEASE - 5)
    assert store.renew("a", [job], lease=LEASE) is True
    assert store.get_job("j1").available_at == clock.now() + LEASE
    clock.advance(10)
    assert store.claim("b", limit=10, lease=LEASE) == []
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is False
    clock.advance(LEASE - 10)
    assert [j.claim_holder for j in store.claim("b", limit=10, lease=LEASE)] == ["b"]


def test_renew_after_the_lease_was_lost_extends_nothing(store: Store, clock: FakeClock) -> None:
    """A holder whose leases ran out and were taken over renews nothing and is told so."""
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    clock.advance(LEASE)
    [taken] = store.claim("b", limit=10, lease=LEASE)
    assert store.renew("a", [job], lease=LEASE) is False
    assert store.get_job("j1") == taken
    assert store.take_session(key("s"), "a", kind="resume", ttl=LEASE) is False


def test_renew_session_extends_only_a_lease_still_held(store: Store, clock: FakeClock) -> None:
    """renew_session extends the holder's own lease and never takes one it no longer holds."""
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is True
    clock.advance(50)
    assert store.renew_session(key("s"), "turn", ttl=60) is True
    clock.advance(50)
    assert store.take_session(key("s"), "other", kind="turn", ttl=60) is False
    assert store.renew_session(key("s"), "other", ttl=60) is False
    store.release_session(key("s"), "turn")
    assert store.renew_session(key("s"), "turn", ttl=60) is False
    assert store.take_session(key("s"), "other", kind="turn", ttl=60) is True


# -- mark_delivered and release ----------------------------------------------------------


def test_mark_delivered_ends_delivery_of_a_final_result(store: Store, clock: FakeClock) -> None:
    """Marking a claimed final result delivered makes it 'delivered' for good; a repeat is False."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    clock.advance(2)
    assert store.mark_delivered(job, "r", throttle=THROTTLE) is True
    done = store.get_job("j1")
    assert done.delivery is Delivery.DELIVERED
    assert done.delivered_at == clock.now()
    assert (done.claim_holder, done.available_at, done.attempts) == (None, None, 0)
    assert store.mark_delivered(job, "r", throttle=THROTTLE) is False
    store.release_session(key("s1"), "r")
    clock.advance(3600)
    assert store.claim("r", limit=10, lease=LEASE) == []
    assert store.get_job("j1") == done


def test_mark_delivered_by_a_non_holder_is_refused(store: Store) -> None:
    """mark_delivered by someone who does not hold the claim returns False and changes nothing."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    assert store.mark_delivered(job, "intruder", throttle=THROTTLE) is False
    assert store.get_job("j1") == job


def test_mark_delivered_of_progress_keeps_the_job_open(store: Store) -> None:
    """A delivered progress announcement leaves the job quiet until its result makes it ready."""
    started(store, "j1", session_id="s", call_id="c")
    store.progress("j1", 1, notify=True, throttle=THROTTLE)
    [job] = store.claim("r", limit=10, lease=LEASE)
    assert store.mark_delivered(job, "r", throttle=THROTTLE) is True
    quiet = store.get_job("j1")
    assert (quiet.state, quiet.delivery, quiet.notified_seq) == (JobState.STARTED, Delivery.NONE, 1)
    assert store.finish("j1", JobState.SUCCEEDED, 2).job.delivery is Delivery.READY


def test_mark_group_delivered_marks_one_message_and_frees_the_session(store: Store) -> None:
    """The jobs of one message are marked together and the session is released in that commit."""
    ready(store, "a1", session="s")
    ready(store, "a2", session="s")
    claimed = store.claim("r", limit=10, lease=LEASE)
    assert (
        store.mark_group_delivered(claimed, "intruder", throttle=THROTTLE, release_session=key("s"))
        == 0
    )
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is False
    heard: list[int] = []
    store.ready_listeners.append(lambda: heard.append(1))
    assert (
        store.mark_group_delivered(claimed, "r", throttle=THROTTLE, release_session=key("s")) == 2
    )
    assert heard == [1]
    assert {store.get_job(k).delivery for k in ("a1", "a2")} == {Delivery.DELIVERED}
    assert store.mark_group_delivered(claimed, "r", throttle=THROTTLE) == 0
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is True


def test_mark_delivered_batch_counts_per_group(store: Store) -> None:
    """A batch marks several groups in one commit and reports each group's count."""
    ready(store, "a1", session="s")
    ready(store, "a2", session="s")
    ready(store, "b1", session="t")
    by_id = {j.job_id: j for j in store.claim("r", limit=10, lease=LEASE)}
    counts = store.mark_delivered_batch(
        [([by_id["a1"], by_id["a2"]], key("s")), ([by_id["b1"]], None)], "r", throttle=THROTTLE
    )
    assert counts == [2, 1]
    assert store.counts() == {("succeeded", "delivered"): 3}
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60) is True
    assert store.take_session(key("t"), "turn", kind="turn", ttl=60) is False  # not released
    assert store.mark_delivered_batch([([by_id["b1"]], key("t"))], "r", throttle=THROTTLE) == [0]
    assert store.take_session(key("t"), "turn", kind="turn", ttl=60) is True


def test_release_retries_after_a_delay(store: Store, clock: FakeClock) -> None:
    """A released job is ready again after the delay, with the error kept and logged."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    assert store.release(job, "r", error="agent busy", delay=15, delivery=Delivery.READY) is True
    store.release_session(key("s1"), "r")
    released = store.get_job("j1")
    assert (released.delivery, released.claim_holder) == (Delivery.READY, None)
    assert (released.last_error, released.available_at) == ("agent busy", clock.now() + 15)
    assert store.job_events("j1")[-1].kind == "delivery_error"
    assert store.job_events("j1")[-1].data == {"error": "agent busy", "attempt": 1}
    assert store.claim("r", limit=10, lease=LEASE) == []
    clock.advance(15)
    [again] = store.claim("r", limit=10, lease=LEASE)
    assert again.attempts == 2
    # A second release by a holder that no longer holds the claim does nothing.
    assert store.release(job, "old", error="x", delay=0, delivery=Delivery.READY) is False
    assert store.get_job("j1").claim_holder == "r"


@pytest.mark.parametrize("delivery", [Delivery.FAILED, Delivery.ORPHANED])
def test_release_as_failed_or_orphaned_stops_retrying(
    store: Store, clock: FakeClock, delivery: Delivery
) -> None:
    """Giving up a delivery stops the retries and leaves the job visible with its error."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    assert store.release(job, "r", error="no such call", delay=0, delivery=delivery) is True
    store.release_session(key("s1"), "r")
    clock.advance(3600)
    assert store.claim("r", limit=10, lease=LEASE) == []
    [visible] = store.list_jobs(delivery=delivery)
    assert (visible.job_id, visible.last_error, visible.state) == (
        "j1",
        "no such call",
        JobState.SUCCEEDED,
    )
    assert store.job_events("j1")[-1].kind == f"delivery_{delivery.value}"
    assert store.counts() == {("succeeded", delivery.value): 1}


def test_release_without_error_logs_nothing(store: Store) -> None:
    """Giving back an unattempted claim (error None) logs no event."""
    ready(store, "j1")
    [job] = store.claim("r", limit=10, lease=LEASE)
    before = kinds(store, "j1")
    assert store.release(job, "r", error=None, delay=0, delivery=Delivery.READY) is True
    assert kinds(store, "j1") == before == ["succeeded"]


# -- deadlines ---------------------------------------------------------------------------


def test_overdue_lists_only_started_jobs_past_their_deadline(
    store: Store, clock: FakeClock
) -> None:
    """overdue returns started jobs whose deadline has come, oldest deadline first."""
    create(store, "late", deadline=120)
    create(store, "early", deadline=60)
    create(store, "none")
    create(store, "done", deadline=30)
    store.finish("done", JobState.SUCCEEDED, 1)
    assert store.overdue(10) == []
    clock.advance(59)
    assert store.overdue(10) == []
    clock.advance(1)
    assert [j.job_id for j in store.overdue(10)] == ["early"]
    clock.advance(600)
    assert [j.job_id for j in store.overdue(10)] == ["early", "late"]
    assert [j.job_id for j in store.overdue(1)] == ["early"]
    expired = store.finish("early", JobState.EXPIRED, {"message": "no result in time"})
    assert expired.changed
    assert [j.job_id for j in store.overdue(10)] == ["late"]


# -- reading -----------------------------------------------------------------------------


def test_get_job_of_an_unknown_id(store: Store) -> None:
    """get_job of an unknown id raises JobNotFound naming it."""
    with pytest.raises(JobNotFound, match="'nope'"):
        store.get_job("nope")


def test_list_jobs_filters(store: Store, clock: FakeClock) -> None:
    """Each list_jobs filter selects exactly the matching jobs, newest first."""
    started(store, "a", user_id="u1", session_id="s1", call_id="c1")
    clock.advance(1)
    create(store, "b", tool_name="report", user_id="u2", session_id="s2")
    clock.advance(1)
    started(store, "c", user_id="u1", session_id="s1", call_id="c2")
    store.finish("c", JobState.FAILED, "boom")

    def ids(**filters: Any) -> list[str]:
        return [j.job_id for j in store.list_jobs(**filters)]

    assert ids() == ["c", "b", "a"]
    assert ids(state=JobState.STARTED) == ["b", "a"]
    assert ids(state=JobState.FAILED) == ["c"]
    assert ids(tool_name="report") == ["b"]
    assert ids(session_id="s1") == ["c", "a"]
    assert ids(user_id="u2") == ["b"]
    assert ids(delivery=Delivery.READY) == ["c"]
    assert ids(delivery=Delivery.NONE, user_id="u1") == ["a"]
    assert ids(state=JobState.SUCCEEDED) == []
    assert ids(limit=2) == ["c", "b"]


def test_list_jobs_pages_with_a_cursor(store: Store, clock: FakeClock) -> None:
    """Paging with before=(created_at, job_id) visits every job once, newest first, ties by id."""
    for n in range(7):
        create(store, f"j{n}")
        if n % 3 == 2:
            clock.advance(1)  # several jobs share a created_at: the id breaks the tie
    seen: list[Job] = []
    before: tuple[float, str] | None = None
    pages = 0
    while True:
        page = store.list_jobs(before=before, limit=3)
        if not page:
            break
        pages += 1
        seen.extend(page)
        before = (page[-1].created_at, page[-1].job_id)
    assert pages == 3
    assert [j.job_id for j in seen] == ["j6", "j5", "j4", "j3", "j2", "j1", "j0"]
    assert [(j.created_at, j.job_id) for j in seen] == sorted(
        ((j.created_at, j.job_id) for j in seen), reverse=True
    )


def test_record_appends_to_the_job_log(store: Store, clock: FakeClock) -> None:
    """record() appends an entry with the next sequence number and the current time."""
    started(store, "j1")
    store.progress("j1", 1, notify=False, throttle=THROTTLE)
    clock.advance(4)
    store.record("j1", "hook_error", {"error": "timeout"})
    events = store.job_events("j1")
    assert [(e.seq, e.kind) for e in events] == [(1, "progress"), (2, "hook_error")]
    assert (events[1].data, events[1].created_at, events[1].job_id) == (
        {"error": "timeout"},
        clock.now(),
        "j1",
    )


def test_counts_by_state_and_delivery(store: Store) -> None:
    """counts() tallies jobs by (state, delivery)."""
    assert store.counts() == {}
    started(store, "a")
    started(store, "b")
    ready(store, "c", session="s1")
    ready(store, "d", session="s2")
    started(store, "e")
    store.finish("e", JobState.EXPIRED, "late")
    assert store.counts() == {
        ("started", "none"): 2,
        ("succeeded", "ready"): 2,
        ("expired", "none"): 1,
    }


@pytest.mark.parametrize("holder", [None, "worker-1/1"], ids=["queued", "held"])
def test_a_created_run_is_the_run_as_stored(store: Store, holder: str | None) -> None:
    """create_run builds the run it returns from what it sent and what the insert returned;
    that must be the row as a later read has it, field for field, JSON round trip included
    (a tuple is stored as a list, integer keys as strings). A repeat returns the stored run."""
    arguments = {"ids": (1, 2), 3: "three", "nested": {"ok": True}}
    created, new = store.create_run(
        "run-1",
        "report",
        arguments,
        holder=holder,
        lease=LEASE,
        user_id="u1",
        concurrency_key="k",
        idempotency_key="once",
        max_retries=2,
        timeout_secs=1.5,
    )
    assert new
    assert created == store.get_run("run-1")
    assert created.input == {"ids": [1, 2], "3": "three", "nested": {"ok": True}}
    assert created.lease_expires_at == (None if holder is None else created.created_at + LEASE)
    assert store.create_run("run-2", "report", {}, idempotency_key="once") == (created, False)
