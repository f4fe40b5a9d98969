"""The job rules as a state machine: random operation sequences against a small Python model.

Runs on SQLite only (a fresh file per example). The model mirrors the contract of DESIGN.md:
the first terminal result wins, a job is ready exactly when it is terminal (or has progress the
model should hear), has session and call id and is not delivered, a live claim or session lease
hides it, and nothing is delivered twice, whichever holder crashes or comes back late.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from longcall import (
    AttachConflict,
    CallIds,
    Delivery,
    FakeClock,
    Job,
    JobNotFound,
    JobState,
    LongcallError,
)
from longcall.core.jobs import SessionKey, expired_result, is_ready
from longcall.store import NewJob, Store, open_store

LEASE = 30.0
THROTTLE = 10.0

KEYS = st.sampled_from([f"k{n}" for n in range(6)])
# A job's own ids (job kN belongs to call cN of session s(N % 2)), half of them, or random ones
# that often conflict with the job's or another job's.
IDS = st.one_of(
    st.sampled_from(["own", "own", "own_session", "own_call"]),
    st.tuples(st.sampled_from([None, "s0", "s1"]), st.sampled_from([None, "c0", "c1", "c2"])),
)
DEADLINES = st.sampled_from([None, 10.0, 60.0])
TERMINAL = st.sampled_from([JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])


@dataclass
class ModelJob:
    """What the model expects of one job row."""

    deadline_at: float | None
    session: str | None = None
    call: str | None = None
    state: JobState = JobState.STARTED
    result: Any = None
    event_seq: int = 0
    notify_seq: int = 0
    notified_seq: int = 0
    notified_at: float | None = None
    delivery: Delivery = Delivery.NONE
    available_at: float | None = None
    claim_holder: str | None = None
    attempts: int = 0
    final_deliveries: int = 0

    @property
    def attached(self) -> bool:
        return self.session is not None and self.call is not None

    @property
    def wants_delivery(self) -> bool:
        return self.attached and (self.state.terminal or self.notify_seq > self.notified_seq)


@dataclass
class Model:
    jobs: dict[str, ModelJob] = field(default_factory=dict)
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)  # session: holder, expiry

    def claimable(self, now: float) -> set[str]:
        live = {s for s, (_, expires) in self.leases.items() if expires > now}
        return {
            key
            for key, job in self.jobs.items()
            if job.delivery is Delivery.READY
            and job.available_at is not None
            and job.available_at <= now
            and job.session not in live
        }


class JobMachine(RuleBasedStateMachine):
    """Random sequences of store operations, checked step by step against the model."""

    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="longcall-sm-")
        self.clock = FakeClock()
        self.store: Store = open_store(
            f"sqlite:///{Path(self.tmp) / 'sm.db'}?synchronous=NORMAL", self.clock
        )
        self.store.migrate()
        self.model = Model()
        self.results = 0
        self.crashed: dict[str, list[Job]] = {}
        self.holders = 0
        self.first_terminal: dict[str, tuple[JobState, Any]] = {}  # as the store first showed it

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def now(self) -> float:
        return self.clock.now()

    # -- rules ---------------------------------------------------------------------------

    def _ids(
        self, key: str, choice: str | tuple[str | None, str | None]
    ) -> tuple[str | None, str | None]:
        """The (session, call) a rule offers: the key's own call, half of it, or random ids."""
        n = int(key[1:])
        own = (f"s{n % 2}", f"c{n}")
        if choice == "own":
            return own
        if choice == "own_session":
            return own[0], None
        if choice == "own_call":
            return None, own[1]
        assert isinstance(choice, tuple)
        return choice

    @rule(target=jobs, key=KEYS, deadline=DEADLINES, ids=IDS)
    def create(
        self, key: str, deadline: float | None, ids: str | tuple[str | None, str | None]
    ) -> Any:
        """A tool starts a job, knowing its session and call id at once or not yet."""
        session, call = self._ids(key, ids)
        new = NewJob(
            key, "export", {"key": key}, CallIds(session_id=session, call_id=call), deadline
        )
        taken = (
            key not in self.model.jobs
            and session is not None
            and call is not None
            and any((j.session, j.call) == (session, call) for j in self.model.jobs.values())
        )
        if taken:
            with pytest.raises(LongcallError):
                self.store.create_job(new, holder="tool", dispatch_lease=60)
            return multiple()
        job, created = self.store.create_job(new, holder="tool", dispatch_lease=60)
        assert created is (key not in self.model.jobs)
        if created:
            deadline_at = None if deadline is None else self.now + deadline
            self.model.jobs[key] = ModelJob(deadline_at=deadline_at, session=session, call=call)
            self.store.finish_dispatch(key, "started")
        model = self.model.jobs[key]
        assert (job.job_id, job.session_id, job.call_id) == (key, model.session, model.call)
        return key

    @initialize(target=jobs, data=st.data())
    def start_jobs(self, data: st.DataObject) -> Any:
        """Every example starts with a few jobs, some of them already joined to their call."""
        keys = [
            self.create(
                f"k{n}", data.draw(DEADLINES), data.draw(st.sampled_from(["own", (None, None)]))
            )
            for n in range(data.draw(st.integers(1, 3)))
        ]
        # Operations on an id no one created raise JobNotFound and create nothing.
        with pytest.raises(JobNotFound):
            self.store.attach("ghost", CallIds(session_id="s0", call_id="c0"))
        with pytest.raises(JobNotFound):
            self.store.finish("ghost", JobState.SUCCEEDED, 1)
        with pytest.raises(JobNotFound):
            self.store.progress("ghost", 1, notify=True, throttle=THROTTLE)
        return multiple(*keys)

    @rule(key=jobs, ids=IDS)
    def attach(self, key: str, ids: str | tuple[str | None, str | None]) -> None:
        """The agent side reports the call: fills what is empty, refuses what conflicts."""
        session, call = self._ids(key, ids)
        job = self.model.jobs[key]
        conflicts = {
            name
            for name, old, new in (
                ("session_id", job.session, session),
                ("call_id", job.call, call),
            )
            if old is not None and new is not None and old != new
        }
        if conflicts:
            with pytest.raises(AttachConflict) as info:
                self.store.attach(key, CallIds(session_id=session, call_id=call))
            assert set(info.value.conflicts) == conflicts
            job.event_seq += 1  # the conflict is logged on the job
            return
        new_session, new_call = job.session or session, job.call or call
        taken = new_call is not None and any(
            other is not job and (other.session, other.call) == (new_session, new_call)
            for other in self.model.jobs.values()
        )
        filled = (new_session, new_call) != (job.session, job.call)
        if filled and taken and new_session is not None:
            with pytest.raises(AttachConflict):
                self.store.attach(key, CallIds(session_id=session, call_id=call))
            return
        got = self.store.attach(key, CallIds(session_id=session, call_id=call))
        job.session, job.call = new_session, new_call
        if filled and job.delivery is Delivery.NONE and job.wants_delivery:
            job.delivery, job.available_at = Delivery.READY, self.now
        assert (got.session_id, got.call_id) == (job.session, job.call)

    def _finish(self, key: str, state: JobState) -> None:
        self.results += 1
        result = {"n": self.results}
        job = self.model.jobs[key]
        outcome = self.store.finish(key, state, result, request_cancel=state is JobState.CANCELLED)
        job.event_seq += 1
        overdue = job.deadline_at is not None and job.deadline_at <= self.now
        if job.state is JobState.STARTED and overdue and state is not JobState.EXPIRED:
            # Too late: the deadline answers in the same transaction, then the result is
            # recorded as ignored (two events).
            job.event_seq += 1
            self._finished(job, JobState.EXPIRED, expired_result(outcome.job))
            assert (outcome.changed, outcome.late) == (False, True)
        else:
            assert outcome.changed is (not job.state.terminal)
            # Every expiry in this model comes at or after the deadline.
            assert outcome.late is (job.state is JobState.EXPIRED and state is not job.state)
            if outcome.changed:
                self._finished(job, state, result)
        assert (outcome.job.state, outcome.job.result) == (job.state, job.result)

    def _finished(self, job: ModelJob, state: JobState, result: Any) -> None:
        job.state, job.result = state, result
        if job.delivery is Delivery.NONE and job.attached:
            job.delivery, job.available_at = Delivery.READY, self.now
        elif job.delivery is Delivery.READY and job.claim_holder is None:
            assert job.available_at is not None
            job.available_at = min(job.available_at, self.now)

    @rule(key=jobs, state=TERMINAL)
    def finish(self, key: str, state: JobState) -> None:
        self._finish(key, state)

    @rule(key=jobs, notify=st.booleans())
    def progress(self, key: str, notify: bool) -> None:
        job = self.model.jobs[key]
        got = self.store.progress(key, {"at": self.now}, notify=notify, throttle=THROTTLE)
        if job.state.terminal:
            assert got is None
            return
        job.event_seq += 1
        if notify:
            job.notify_seq = job.event_seq
            if job.delivery is Delivery.NONE and job.attached:
                job.delivery = Delivery.READY
                earliest = self.now if job.notified_at is None else job.notified_at + THROTTLE
                job.available_at = max(self.now, earliest)
        assert got is not None and got.progress_seq == job.event_seq

    @rule(seconds=st.sampled_from([10.0, 31.0, 1.0, 61.0]))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def expire(self) -> None:
        overdue = self.store.overdue(100)
        expected = {
            key
            for key, job in self.model.jobs.items()
            if job.state is JobState.STARTED
            and job.deadline_at is not None
            and job.deadline_at <= self.now
        }
        assert {j.job_id for j in overdue} == expected
        deadlines = [j.deadline_at for j in overdue if j.deadline_at is not None]
        assert deadlines == sorted(deadlines) and len(deadlines) == len(overdue)
        for job in overdue:
            expired = self.store.expire(job)
            model = self.model.jobs[job.job_id]
            model.event_seq += 1
            self._finished(model, JobState.EXPIRED, expired_result(job))
            assert expired is not None and (expired.state, expired.result) == (
                model.state,
                model.result,
            )

    def _claim(self, holder: str) -> list[Job]:
        expected = self.model.claimable(self.now)
        claimed = self.store.claim(holder, limit=100, lease=LEASE)
        assert {j.job_id for j in claimed} == expected
        for snapshot in claimed:
            job = self.model.jobs[snapshot.job_id]
            job.claim_holder, job.available_at = holder, self.now + LEASE
            job.attempts += 1
            assert job.session is not None
            self.model.leases[job.session] = (holder, self.now + LEASE)
        return claimed

    def _mark(self, snapshot: Job, holder: str) -> None:
        job = self.model.jobs[snapshot.job_id]
        ok = self.store.mark_delivered(snapshot, holder, throttle=THROTTLE)
        assert ok is (job.claim_holder == holder and job.delivery is Delivery.READY)
        if not ok:
            return
        job.claim_holder, job.attempts = None, 0
        if snapshot.terminal:
            assert job.final_deliveries == 0, "a final response was delivered twice"
            job.final_deliveries += 1
            job.delivery, job.available_at = Delivery.DELIVERED, None
            return
        job.notified_seq, job.notified_at = snapshot.notify_seq, self.now
        if job.state.terminal:
            job.delivery, job.available_at = Delivery.READY, self.now
        elif job.notify_seq > snapshot.notify_seq:
            job.delivery, job.available_at = Delivery.READY, self.now + THROTTLE
        else:
            job.delivery, job.available_at = Delivery.NONE, None

    def _release_sessions(self, holder: str, sessions: set[str]) -> None:
        for session in sessions:
            self.store.release_session(SessionKey("", "", session), holder)
            if self.model.leases.get(session, ("", 0.0))[0] == holder:
                del self.model.leases[session]

    @rule()
    def deliver(self) -> None:
        """A resumer's pass: claim, mark each response delivered, release the sessions."""
        claimed = self._claim("resumer")
        for snapshot in claimed:
            self._mark(snapshot, "resumer")
        self._release_sessions("resumer", {j.session_id for j in claimed if j.session_id})

    @rule()
    def crash_after_claim(self) -> None:
        """A resumer claims and then stops: its claims and session leases run out on their own."""
        self.holders += 1
        holder = f"crashed-{self.holders}"
        claimed = self._claim(holder)
        if claimed:
            self.crashed[holder] = claimed

    @rule(oldest=st.booleans())
    def late_holder_marks(self, oldest: bool) -> None:
        """A holder presumed dead comes back to record its deliveries: refused once taken over."""
        if not self.crashed:
            return
        holder = list(self.crashed)[0 if oldest else -1]
        claimed = self.crashed.pop(holder)
        for snapshot in claimed:
            self._mark(snapshot, holder)
        self._release_sessions(holder, {j.session_id for j in claimed if j.session_id})

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        rows = {j.job_id: j for j in self.store.list_jobs(limit=1000)}
        assert set(rows) == set(self.model.jobs)
        for key, job in self.model.jobs.items():
            row = rows[key]
            assert (row.state, row.result) == (job.state, job.result), key
            assert (row.session_id, row.call_id) == (job.session, job.call), key
            assert row.delivery is job.delivery, key
            assert (row.available_at, row.claim_holder, row.attempts) == (
                job.available_at,
                job.claim_holder,
                job.attempts,
            ), key
            assert (row.notify_seq, row.notified_seq) == (job.notify_seq, job.notified_seq), key
            assert is_ready(row) is (row.delivery is Delivery.READY), key
            assert (row.delivery is Delivery.DELIVERED) is (job.final_deliveries == 1), key
            if job.state.terminal:
                assert row.finished_at is not None, key
            assert len(self.store.job_events(key)) == job.event_seq, key
            if row.state.terminal:
                # Once terminal, always the same terminal state and the same (first) result.
                first = self.first_terminal.setdefault(key, (row.state, row.result))
                assert (row.state, row.result) == first, key
            else:
                assert key not in self.first_terminal, key


def test_job_rules_state_machine() -> None:
    """Random create/attach/finish/progress/expire/claim/deliver sequences obey the job rules."""
    run_state_machine_as_test(
        JobMachine,
        settings=settings(
            max_examples=300,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
