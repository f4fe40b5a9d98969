"""The store: the job table's operations, each atomic, written once for every database.

Subclasses only open connections and transactions (:meth:`Store._transact`) and say which SQL
dialect they speak; the operations, the row mapping and the rules about what a repeated call
does live here. Every operation is synchronous and thread-safe; :class:`~longcall.app.App`
runs them on a thread pool for its ``*_async`` methods.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from longcall.core.jobs import (
    CallIds,
    Delivery,
    FinishOutcome,
    Job,
    JobEvent,
    JobState,
    SessionKey,
    expired_result,
    plan_attach,
)
from longcall.core.runs import Run, RunStatus
from longcall.errors import (
    AttachConflict,
    JobNotFound,
    NotRedeliverable,
    SchemaError,
    StoreError,
)
from longcall.store import queries as sql
from longcall.store._forks import ForkOps
from longcall.store._hooks import HookOps
from longcall.store._listings import ListingOps
from longcall.store._logins import LoginOps
from longcall.store._queues import QueueOps
from longcall.store._retention import RetentionOps
from longcall.store._run_children import RunChildOps
from longcall.store._run_messages import RunMessageOps
from longcall.store._run_streams import RunStreamOps
from longcall.store._sessions import SessionOps
from longcall.store._tokens import TokenOps
from longcall.store._workers import WorkerOps
from longcall.store.core import (
    NOTIFY_CHANNEL,
    Row,
    StoreCore,
    T,
    Tx,
    dumps,
    job_from_row,
    loads,
)
from longcall.store.cron import CronOps
from longcall.store.runs import RunOps

__all__ = [
    "INGEST_KINDS",
    "NOTIFY_CHANNEL",
    "Ingested",
    "NewJob",
    "OutboxItem",
    "Row",
    "Store",
    "StoreCore",
    "T",
    "Tx",
    "dumps",
    "job_from_row",
    "loads",
]

log = logging.getLogger("longcall.store")


@dataclass(frozen=True, slots=True)
class NewJob:
    """What the tool knows when it starts a job."""

    job_id: str
    tool_name: str
    args: Mapping[str, Any]
    ids: CallIds
    deadline: float | None  # seconds from now; None: no deadline
    # Whether the tool declared an on_cancel hook: a cancel or an expiry queues the hook's
    # outbox item only then. True when unknown, so that no hook call is ever lost.
    cancel_hook: bool = True
    # The id the same key had before job ids were namespaced per user (schema 8): a job of
    # the same user under it is this job, so an upgrade never starts the same work twice.
    legacy_id: str | None = None
    # The job is its call's (a key-less tool): a job already joined to the same session, call
    # and user, of the same tool and arguments, is this job. A framework that runs the tool
    # again for the same call (ADK re-execution, LangGraph's interrupt) gets it back.
    by_call: bool = False
    # The W3C trace context of the span the job is created in (longcall.telemetry), kept so
    # that its completion and delivery, days later and elsewhere, link to that span.
    trace_context: str | None = None


@dataclass(frozen=True, slots=True)
class Ingested:
    """What a delivery from outside did: ``applied``, ``unchanged`` (the job had finished),
    ``duplicate`` (seen before), ``early`` (kept for a job not created yet) or ``unknown_job``
    (progress for a job that does not exist)."""

    outcome: str
    job: Job | None


INGEST_KINDS: dict[str, JobState | None] = {
    "complete": JobState.SUCCEEDED,
    "fail": JobState.FAILED,
    "cancel": JobState.CANCELLED,
    "progress": None,
}


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """Work to hand to the outside world after the job row committed."""

    job_id: str
    kind: str  # "dispatch" or "cancel"
    tool_name: str
    args: dict[str, Any]
    attempts: int


class Store(
    ListingOps,
    RetentionOps,
    SessionOps,
    HookOps,
    TokenOps,
    LoginOps,
    RunChildOps,
    RunOps,
    RunMessageOps,
    RunStreamOps,
    ForkOps,
    QueueOps,
    CronOps,
    WorkerOps,
):
    """The job table and its companions, on one database."""

    dialect: str

    @abstractmethod
    def _schema_version(self) -> int | None:
        """The applied schema version, or None on a database without longcall's tables."""

    @abstractmethod
    def _apply(self, script: str, version: int, name: str, *, from_version: int | None) -> bool:
        """Run one migration (or the whole schema) and record ``version``, atomically.

        Does nothing and returns False unless the schema is at ``from_version`` once the
        migration lock is held (another process migrated first).
        """

    @abstractmethod
    def close(self) -> None: ...

    # -- schema -------------------------------------------------------------------------

    def migrate(self, *, stepwise: bool = False) -> list[int]:
        """Bring the schema to the latest version; return the versions this call applied.

        A new database gets ``schema.sql`` in one step (or, with ``stepwise``, every
        migration in turn); an older one each missing migration. Safe to run from several
        processes at once: each step checks the version under the database's write lock.
        """
        latest = sql.latest_version(self.dialect)
        current = self._schema_version()
        if current is not None and current > latest:
            raise SchemaError(
                f"the database has schema version {current}, newer than this longcall "
                f"({latest}); upgrade longcall"
            )
        if current is None and not stepwise:
            if self._apply(sql.schema(self.dialect), latest, "schema", from_version=None):
                return [latest]
            current = self._schema_version()
        applied = []
        for migration in sql.migrations(self.dialect)[current or 0 :]:
            before = None if migration.version == 1 else migration.version - 1
            if self._apply(migration.sql, migration.version, migration.name, from_version=before):
                applied.append(migration.version)
        return applied

    def check_schema(self) -> None:
        """Raise :class:`SchemaError` unless the schema is exactly the latest version."""
        latest = sql.latest_version(self.dialect)
        current = self._schema_version()
        if current == latest:
            return
        if current is None:
            raise SchemaError("the database has no longcall schema; run `longcall migrate`")
        if current < latest:
            raise SchemaError(
                f"the database has schema version {current}, this longcall needs {latest}; "
                "run `longcall migrate`"
            )
        raise SchemaError(
            f"the database has schema version {current}, newer than this longcall ({latest})"
        )

    def schema_version(self) -> int | None:
        return self._schema_version()

    # -- jobs ---------------------------------------------------------------------------

    def create_job(
        self, new: NewJob, *, holder: str, dispatch_lease: float, dispatch: bool = True
    ) -> tuple[Job, bool]:
        """Insert the job unless its id exists; return it and whether this call created it.

        A new job gets a ``dispatch`` outbox row held by ``holder`` for ``dispatch_lease``
        seconds: the caller submits the work and then calls :meth:`finish_dispatch`; if it
        crashes first, a worker's dispatcher submits it once the hold runs out. A job whose
        work runs outside Python (``dispatch=False``, created over HTTP) has no outbox row.

        A job id that exists returns that job. A call id that another job of the same session
        and user already has is an :class:`AttachConflict`, unless ``new.by_call`` and that
        job is of the same tool with the same arguments: then it is this call's job, returned
        with ``False``.
        """
        try:
            return self._create_job(
                new, holder=holder, dispatch_lease=dispatch_lease, dispatch=dispatch
            )
        except AttachConflict:
            if not new.by_call:
                raise
            # The index refused the insert: the call's job committed first. Read it anew (a
            # PostgreSQL transaction that hit the violation can run nothing more).
            row = self._transact(
                lambda tx: tx.one("get_job_of_call", **new.ids.as_dict()), write=False
            )
            if row is None:  # that job was abandoned again meanwhile: it is free now
                return self._create_job(
                    new, holder=holder, dispatch_lease=dispatch_lease, dispatch=dispatch
                )
            return self._same_call(new, job_from_row(row)), False

    def _same_call(self, new: NewJob, job: Job) -> Job:
        """``job`` if it is ``new`` made again for the same call, else an AttachConflict."""
        conflicts: dict[str, tuple[str, str]] = {}
        if job.tool_name != new.tool_name:
            conflicts["tool_name"] = (job.tool_name, new.tool_name)
        args = dumps(dict(new.args))
        if job.args != loads(args):
            conflicts["args"] = (dumps(job.args), args)
        if conflicts:
            raise AttachConflict(job.job_id, conflicts)
        return job

    def _create_job(
        self, new: NewJob, *, holder: str, dispatch_lease: float, dispatch: bool
    ) -> tuple[Job, bool]:
        now = self.now()

        def work(tx: Tx) -> tuple[Job, bool]:
            legacy = self._legacy_job(tx, new)
            if legacy is not None:
                return legacy, False
            try:
                row = tx.one(
                    "insert_job",
                    job_id=new.job_id,
                    tool_name=new.tool_name,
                    args=dumps(dict(new.args)),
                    deadline=new.deadline,
                    cancel_hook=new.cancel_hook,
                    trace_context=new.trace_context,
                    now=now,
                    **new.ids.as_dict(),
                )
            except Exception as exc:  # the unique (session, call) index: the call has a job
                if not self._is_unique_violation(exc):
                    raise
                raise AttachConflict(
                    new.job_id, {"call_id": ("(another job)", new.ids.call_id or "")}
                ) from exc
            if row is None:
                existing = tx.one("get_job", job_id=new.job_id)
                if existing is None:  # deleted between the two statements: try again
                    raise StoreError(f"job {new.job_id!r} vanished while being created")
                return job_from_row(existing), False
            if dispatch:
                tx.run(
                    "insert_outbox",
                    job_id=new.job_id,
                    kind="dispatch",
                    delay=dispatch_lease,
                    holder=holder,
                    now=now,
                )
            early = tx.one("take_early_result", job_id=new.job_id)
            if early is not None:  # its result came from outside before the job existed
                state = JobState(early["state"])
                finished = self._finish_in(
                    tx, new.job_id, state, loads(early["result"]), False, now
                )
                return finished.job, True
            return job_from_row(row), True

        return self._transact(work)

    def _legacy_job(self, tx: Tx, new: NewJob) -> Job | None:
        """The same user's job under ``new.legacy_id``, while ``new.job_id`` does not exist.

        Another user's job (or one without a user) under the bare id is never it: that is
        exactly the squatting the namespaced ids prevent.
        """
        if new.legacy_id is None or new.legacy_id == new.job_id or new.ids.user_id is None:
            return None
        if tx.one("get_job", job_id=new.job_id) is not None:
            return None
        row = tx.one("get_job", job_id=new.legacy_id)
        if row is None or row["user_id"] != new.ids.user_id:
            return None
        return job_from_row(row)

    def finish_dispatch(
        self, job_id: str, message: str | None, fields: Mapping[str, Any] | None = None
    ) -> None:
        """The work was submitted: drop the outbox row and keep what the tool answered.

        Committed without its own fsync where the backend allows (see ``_transact``).

        ``message`` and ``fields`` (JSON-ready values the tool returned beside its message)
        are recorded once: a later call keeps the first of each.
        """
        now = self.now()
        stored = dumps(dict(fields)) if fields else None

        def work(tx: Tx) -> None:
            tx.run("delete_outbox", job_id=job_id, kind="dispatch")
            if message is not None or stored is not None:
                tx.run("set_pending", job_id=job_id, message=message, fields=stored, now=now)

        # Lost in a power cut, this only means the body is submitted again with the same
        # job id, as after any crash between the job's commit and this one.
        self._transact(work, durable=False)

    def abandon_job(self, job_id: str) -> bool:
        """Delete a job whose submission failed in the tool call itself, before anyone saw it.

        Only a started job whose dispatch is still outstanding is deleted, so a job that
        someone already completed or whose work did get submitted is never lost.
        """

        def work(tx: Tx) -> bool:
            return tx.run("abandon_job", job_id=job_id) > 0

        return self._transact(work)

    def attach(self, job_id: str, ids: CallIds) -> Job:
        """Fill the job's empty id columns; refuse (and record) a conflicting mapping.

        Repeating an attach with the same ids changes nothing and writes nothing (a read
        answers it: ids, once set, never change). A job that is already terminal becomes
        ready for delivery the moment both session and call id are known.
        """
        now = self.now()
        seen = self._transact(lambda tx: tx.one("get_job", job_id=job_id), write=False)
        if seen is not None:
            fill, conflicts = plan_attach(job_from_row(seen), ids)
            if not fill and not conflicts:
                return job_from_row(seen)

        def work(tx: Tx) -> Job | AttachConflict:
            row = tx.one("get_job_for_update", job_id=job_id)
            if row is None:
                raise JobNotFound(job_id)
            job = job_from_row(row)
            fill, conflicts = plan_attach(job, ids)
            if conflicts:
                self._event(
                    tx, job_id, "attach_conflict", {k: list(v) for k, v in conflicts.items()}, now
                )
                return AttachConflict(job_id, conflicts)
            if not fill:
                return job
            try:
                updated = tx.one("attach_job", job_id=job_id, now=now, **CallIds(**fill).as_dict())
            except Exception as exc:  # the unique (session, call) index: another job has it
                if not self._is_unique_violation(exc):
                    raise
                raise AttachConflict(
                    job_id, {"call_id": ("(another job)", fill.get("call_id", ""))}
                ) from exc
            assert updated is not None
            attached = job_from_row(updated)
            if attached.delivery is Delivery.READY and job.delivery is not Delivery.READY:
                self._ready(tx)
            return attached

        result = self._transact(work)
        if isinstance(result, AttachConflict):
            raise result
        if result.delivery is Delivery.READY:
            self._after_ready()
        return result

    def progress(self, job_id: str, data: Any, *, notify: bool, throttle: float) -> Job | None:
        """Append progress to the job's log; None when the job is already terminal.

        With ``notify`` the model hears of it: the job becomes ready for a progress delivery,
        no sooner than ``throttle`` seconds after the last one it heard.
        """
        now = self.now()
        job = self._transact(lambda tx: self._progress_in(tx, job_id, data, notify, throttle, now))
        if job is not None and job.delivery is Delivery.READY:
            self._after_ready()
        return job

    def finish(
        self, job_id: str, state: JobState, result: Any, *, request_cancel: bool = False
    ) -> FinishOutcome:
        """The conditional terminal update: the first terminal result wins.

        A later call changes nothing, is recorded in the job's log, and returns
        ``changed=False`` with the job as it stands. ``request_cancel`` queues a ``cancel``
        outbox item so the external work is asked to stop, when the job's tool declared an
        ``on_cancel`` hook (:attr:`NewJob.cancel_hook`); otherwise nothing is queued.

        A result at or after the job's deadline (``now >= deadline_at``, on the database's
        clock unless a test clock is set) is late: it is recorded as such and changes
        nothing, and a job still started is expired in the same transaction, exactly as the
        sweeper would expire it. It returns ``changed=False, late=True`` with the expired job.
        ``expired`` itself is never late.
        """
        if not state.terminal:
            raise ValueError(f"{state} is not a terminal state")
        now = self.now()

        outcome = self._transact(
            lambda tx: self._finish_in(tx, job_id, state, result, request_cancel, now)
        )
        # A late result may just have expired the job: that wakes the resumers too.
        if (outcome.changed or outcome.late) and outcome.job.delivery is Delivery.READY:
            self._after_ready()
        return outcome

    def _run_ended_in(self, tx: Tx, run: Run, now: float | None) -> bool:
        assert run.job_id is not None
        if run.status is RunStatus.COMPLETED:
            state, body = JobState.SUCCEEDED, run.result
        elif run.status is RunStatus.FAILED:
            state, body = (
                JobState.FAILED,
                {"error": (run.error or {}).get("message"), **(run.error or {})},
            )
        else:
            state, body = JobState.CANCELLED, {"message": "The run doing this job was cancelled."}
        try:
            outcome = self._finish_in(tx, run.job_id, state, body, False, now)
        except JobNotFound:
            return False
        return (outcome.changed or outcome.late) and outcome.job.delivery is Delivery.READY

    def _progress_in(
        self, tx: Tx, job_id: str, data: Any, notify: bool, throttle: float, now: float | None
    ) -> Job | None:
        row = tx.one(
            "record_progress",
            job_id=job_id,
            data=dumps(data),
            notify=notify,
            throttle=throttle,
            now=now,
        )
        if row is None:
            if tx.one("get_job", job_id=job_id) is None:
                raise JobNotFound(job_id)
            return None
        job = job_from_row(row)
        tx.run(
            "insert_event",
            job_id=job_id,
            seq=job.progress_seq,
            kind="progress",
            data=dumps({"data": data, "notifyModel": notify}),
            now=now,
        )
        if job.delivery is Delivery.READY:
            self._ready(tx)
        return job

    def _finish_in(
        self,
        tx: Tx,
        job_id: str,
        state: JobState,
        result: Any,
        request_cancel: bool,
        now: float | None,
    ) -> FinishOutcome:
        # The hot path is this one statement: it applies the result only to a started job
        # whose deadline is still ahead, compared on the clock at the update itself.
        row = tx.one("finish_job", job_id=job_id, state=state.value, result=dumps(result), now=now)
        if row is not None:
            job = self._finished_in(tx, row, result, request_cancel, now)
            return FinishOutcome(changed=True, job=job)
        current = tx.one("get_job_for_update", job_id=job_id)
        if current is None:
            raise JobNotFound(job_id)
        job = job_from_row(current)
        if job.state is JobState.STARTED:
            # Refused while started: the deadline had passed. The deadline answers, here as
            # the sweeper would, so the outcome never depends on whether it has run yet.
            expired = self._expire_in(tx, job, now)
            if expired is None:  # the deadline was moved on between the two statements
                return self._finish_in(tx, job_id, state, result, request_cancel, now)
            job = expired
        # Late: the job expired at or after its deadline, so this result, which came later
        # still, came after the deadline too (a job expired by hand before it is not late).
        late = (
            job.state is JobState.EXPIRED
            and state is not JobState.EXPIRED
            and job.deadline_at is not None
            and job.finished_at is not None
            and job.deadline_at <= job.finished_at
        )
        self._event(
            tx,
            job_id,
            "ignored",
            {
                "state": state.value,
                "result": result,
                "reason": "late: after the deadline" if late else f"already {job.state.value}",
                **({"late": True, "deadlineAt": job.deadline_at} if late else {}),
            },
            now,
        )
        return FinishOutcome(changed=False, job=job, late=late)

    def _expire_in(self, tx: Tx, job: Job, now: float | None) -> Job | None:
        """Expire ``job`` if it is started and its deadline has passed; None otherwise."""
        result = expired_result(job)
        row = tx.one("expire_job", job_id=job.job_id, result=dumps(result), now=now)
        if row is None:
            return None
        return self._finished_in(tx, row, result, True, now)

    def _finished_in(
        self, tx: Tx, row: Row, result: Any, request_cancel: bool, now: float | None
    ) -> Job:
        """What follows a terminal update in its transaction: the event, the cancel request,
        the wake-up of the resumers."""
        job = job_from_row(row)
        tx.run(
            "insert_event",
            job_id=job.job_id,
            seq=row["event_seq"],
            kind=job.state.value,
            data=dumps(result),
            now=now,
        )
        if request_cancel and row["cancel_hook"]:
            tx.run("insert_outbox", job_id=job.job_id, kind="cancel", delay=0, holder=None, now=now)
        if job.delivery is Delivery.READY:
            self._ready(tx)
        return job

    def ingest(
        self,
        *,
        source: str,
        delivery_id: str,
        job_id: str,
        kind: str,
        payload: Any,
        notify: bool = False,
        throttle: float = 0.0,
    ) -> Ingested:
        """A delivery from outside (a signed webhook), applied at most once, atomically.

        The delivery's id is recorded in the same transaction as the change it makes, so a
        repeat of ``(source, delivery_id)`` is answered ``duplicate`` and changes nothing.
        ``kind`` is ``complete``, ``fail``, ``cancel`` or ``progress``. A terminal result for
        a job that does not exist yet is kept (``early``) and applied when the job is created;
        the first one wins there too. Progress for an unknown job is only recorded.
        """
        if kind not in INGEST_KINDS:
            raise ValueError(f"unknown delivery kind {kind!r}; use one of {sorted(INGEST_KINDS)}")
        state = INGEST_KINDS[kind]
        now = self.now()

        def work(tx: Tx) -> Ingested:
            ids = {"source": source, "delivery_id": delivery_id}
            if tx.one("insert_inbox", job_id=job_id, kind=kind, now=now, **ids) is None:
                return Ingested("duplicate", None)
            job: Job | None
            try:
                if state is None:
                    job = self._progress_in(tx, job_id, payload, notify, throttle, now)
                    outcome = "applied" if job is not None else "unchanged"
                else:
                    finished = self._finish_in(
                        tx, job_id, state, payload, state is JobState.CANCELLED, now
                    )
                    job = finished.job
                    outcome = "applied" if finished.changed else "unchanged"
            except JobNotFound:
                job = None
                outcome = "unknown_job"
                if state is not None:
                    tx.run(
                        "insert_early_result",
                        job_id=job_id,
                        state=state.value,
                        result=dumps(payload),
                        now=now,
                        **ids,
                    )
                    outcome = "early"
            tx.run("set_inbox_outcome", outcome=outcome, **ids)
            return Ingested(outcome, job)

        ingested = self._transact(work)
        if ingested.job is not None and ingested.job.delivery is Delivery.READY:
            self._after_ready()
        return ingested

    def inbox(self, job_id: str) -> list[dict[str, Any]]:
        """The deliveries from outside that named ``job_id``, oldest first."""
        rows = self._transact(lambda tx: tx.all("job_inbox", job_id=job_id), write=False)
        return [dict(row) for row in rows]

    def extend(self, job_id: str, seconds: float) -> Job | None:
        """Move a started job's deadline to ``seconds`` from now; None when it has finished."""
        now = self.now()

        def work(tx: Tx) -> Job | None:
            row = tx.one("extend_deadline", job_id=job_id, seconds=seconds, now=now)
            if row is None:
                if tx.one("get_job", job_id=job_id) is None:
                    raise JobNotFound(job_id)
                return None
            self._event(tx, job_id, "extended", {"deadlineAt": row["deadline_at"]}, now)
            return job_from_row(row)

        return self._transact(work)

    def overdue(self, limit: int) -> list[Job]:
        """Started jobs past their deadline, oldest deadline first."""
        now = self.now()
        rows = self._transact(lambda tx: tx.all("overdue_jobs", now=now, limit=limit), write=False)
        return [job_from_row(r) for r in rows]

    def expire(self, job: Job) -> Job | None:
        """Expire ``job`` (from :meth:`overdue`) if it is still started and still overdue.

        One conditional update, on the same clock and rule as :meth:`finish` uses to find a
        result late, with the cancel request for the tool's ``on_cancel`` hook. Returns the
        expired job, or None when it had finished or its deadline was moved on since.
        """
        now = self.now()
        expired = self._transact(lambda tx: self._expire_in(tx, job, now))
        if expired is not None and expired.delivery is Delivery.READY:
            self._after_ready()
        return expired

    def claim(
        self, holder: str, *, limit: int, lease: float, app_name: str | None = None
    ) -> list[Job]:
        """Atomically take ready jobs with their sessions' leases.

        With ``app_name`` only that app's jobs are taken, and those that name no app (created
        over HTTP without one, or before schema 12): a claim gives such a job to ``app_name``
        for good, so it is delivered into that app's session and leased as such. Without
        ``app_name`` every app's jobs are taken, each as its own (a job of no app as one of
        the app ``""``): for a database that serves one agent.

        The sessions are those of the first ``limit`` ready jobs whose session is free; every
        ready job of each is taken, so the limit never splits the calls of one invocation.

        A job is taken only together with its session's lease (its app's, user's and session
        id's), so a resume never starts while a user turn (or another resume) runs on that
        session. Both leases run out after ``lease`` seconds unless renewed; a crashed
        holder's jobs go back to the queue.
        """
        now = self.now()

        def key_of(row: Row) -> SessionKey:
            return SessionKey(
                row["app_name"] or app_name or "", row["user_id"] or "", row["session_id"]
            )

        def work(tx: Tx) -> list[Job]:
            if app_name is None:
                rows = tx.all("claim_candidates", now=now, limit=limit)
            else:
                rows = tx.all("claim_candidates_for_app", app_name=app_name, now=now, limit=limit)
            # Leases in a fixed order: two claimers wanting the same sessions queue instead
            # of deadlocking on each other's lease rows.
            keys = list(dict.fromkeys(key_of(row) for row in rows))
            fences: dict[SessionKey, int] = {}
            for key in sorted(keys):
                lease_row = tx.one(
                    "take_session_lease",
                    **key.as_dict(),
                    holder=holder,
                    kind="resume",
                    ttl=lease,
                    now=now,
                )
                if lease_row is not None:
                    fences[key] = lease_row["fence"]
            # With its session in hand, take every ready job of it, not only those within
            # the limit, so the calls of one invocation go out as one message. When the
            # limit cut nothing off, the candidates are all there is.
            truncated = len(rows) >= limit
            claimed = []
            for key in keys:
                if key not in fences:
                    continue
                if truncated:
                    ready = tx.all(
                        "session_ready_jobs",
                        **key.as_dict(),
                        unscoped=app_name is not None or key.app_name == "",
                        now=now,
                    )
                else:
                    ready = [row for row in rows if key_of(row) == key]
                for row in ready:
                    got = tx.one(
                        "claim_job",
                        job_id=row["job_id"],
                        holder=holder,
                        fence=fences[key],
                        app_name=app_name,
                        lease=lease,
                        now=now,
                    )
                    if got is not None:
                        claimed.append(job_from_row(got))
            return claimed

        return self._transact(work)

    def renew(self, holder: str, jobs: Iterable[Job], *, lease: float) -> bool:
        """Extend the claims on ``jobs`` and their sessions' leases by ``lease`` seconds.

        Only leases still held under the jobs' fence are extended; a released one is never
        taken again here. False when a session's lease was lost (it ran out and someone else
        took it, or this holder's own newer claim did).
        """
        now = self.now()
        jobs = list(jobs)

        def work(tx: Tx) -> bool:
            # The jobs of one session were claimed together, under one fence; a session
            # whose lease is lost keeps its jobs' claims as they are, to run out.
            fences = {j.session_key: j.claim_fence for j in jobs if j.session_id}
            kept = {
                key
                for key in sorted(fences)
                if tx.run(
                    "renew_fenced_session_lease",
                    **key.as_dict(),
                    holder=holder,
                    fence=fences[key],
                    ttl=lease,
                    now=now,
                )
            }
            for job in jobs:
                if job.session_id and job.session_key in kept:
                    tx.run(
                        "renew_job_claim",
                        job_id=job.job_id,
                        holder=holder,
                        fence=job.claim_fence,
                        lease=lease,
                        now=now,
                    )
            return len(kept) == len(fences)

        return self._transact(work, durable=not self.relaxed_leases)

    def mark_delivered(self, job: Job, holder: str, *, throttle: float) -> bool:
        """Record that the response built from ``job`` is in the session.

        For a terminal job that ends delivery. For a progress delivery the job goes quiet
        until newer progress (no sooner than ``throttle``) or its final result. False when
        the claim was lost: the job was claimed again since (its fence moved on), whoever
        holds it now.
        """
        return self.mark_group_delivered([job], holder, throttle=throttle) == 1

    def mark_group_delivered(
        self,
        jobs: Sequence[Job],
        holder: str,
        *,
        throttle: float,
        release_session: SessionKey | None = None,
    ) -> int:
        """:meth:`mark_delivered` for the jobs of one message, in one commit.

        With ``release_session`` the session's lease is released in the same commit, so the
        last message of a pass costs one commit, not two. Returns how many were marked.
        """
        return self.mark_delivered_batch([(jobs, release_session)], holder, throttle=throttle)[0]

    def mark_delivered_batch(
        self,
        groups: Sequence[tuple[Sequence[Job], SessionKey | None]],
        holder: str,
        *,
        throttle: float,
    ) -> list[int]:
        """Several :meth:`mark_group_delivered` calls in one commit (a group commit).

        Returns, per group, how many of its jobs were marked.
        """
        now = self.now()

        def work(tx: Tx) -> tuple[list[int], bool]:
            counts, released = [], False
            for jobs, release_session in groups:
                marked = 0
                for job in jobs:
                    if job.terminal:
                        marked += tx.run(
                            "mark_final_delivered",
                            job_id=job.job_id,
                            holder=holder,
                            fence=job.claim_fence,
                            now=now,
                        )
                    else:
                        marked += tx.run(
                            "mark_progress_delivered",
                            job_id=job.job_id,
                            holder=holder,
                            fence=job.claim_fence,
                            seq=job.notify_seq,
                            throttle=throttle,
                            now=now,
                        )
                counts.append(marked)
                # Only the take these jobs were claimed under, nothing newer.
                if release_session is not None and self._release_lease(
                    tx, release_session, holder, jobs[0].claim_fence if jobs else None
                ):
                    released = True
            if released:
                self._ready(tx)
            return counts, released

        counts, released = self._transact(work)
        if released:
            self._after_ready()
        return counts

    def release(
        self, job: Job, holder: str, *, error: str | None, delay: float, delivery: Delivery
    ) -> bool:
        """Give a claimed job back: after a failed delivery, or unattempted (``error`` None).

        ``delivery`` READY retries after ``delay`` seconds; FAILED or ORPHANED stop retrying
        and leave the job visible with ``error``.
        """
        now = self.now()

        def work(tx: Tx) -> bool:
            changed = tx.run(
                "release_job",
                job_id=job.job_id,
                holder=holder,
                fence=job.claim_fence,
                error=error,
                delivery=delivery.value,
                delay=delay,
                now=now,
            )
            if changed and error is not None:
                kind = (
                    "delivery_error" if delivery is Delivery.READY else f"delivery_{delivery.value}"
                )
                self._event(tx, job.job_id, kind, {"error": error, "attempt": job.attempts}, now)
            return changed > 0

        return self._transact(work)

    def redeliver(self, job_id: str, *, app_name: str | None = None) -> Job:
        """Make an orphaned (or given-up) delivery ready again, once its cause is fixed.

        The job goes back to delivery ``ready`` with its attempts reset; the error that
        stopped it moves to the job's log as a ``redelivered`` event. With ``app_name`` the
        job is delivered into that app's session from now on (it went to the wrong one).
        Any other delivery state is refused with :class:`NotRedeliverable`, changing nothing;
        :class:`JobNotFound` for an unknown id.
        """
        now = self.now()

        def work(tx: Tx) -> Job:
            before = tx.one("get_job_for_update", job_id=job_id)
            if before is None:
                raise JobNotFound(job_id)
            row = tx.one("redeliver_job", job_id=job_id, app_name=app_name, now=now)
            if row is None:
                raise NotRedeliverable(job_id, before["delivery"])
            data = {"delivery": before["delivery"], "error": before["last_error"]}
            if app_name is not None and app_name != before["app_name"]:
                data["appName"] = app_name
            self._event(tx, job_id, "redelivered", data, now)
            self._ready(tx)
            return job_from_row(row)

        job = self._transact(work)
        self._after_ready()
        return job

    def get_job(self, job_id: str) -> Job:
        row = self._transact(lambda tx: tx.one("get_job", job_id=job_id), write=False)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    def job_events(self, job_id: str, *, after: int = 0) -> list[JobEvent]:
        rows = self._transact(
            lambda tx: tx.all("job_events", job_id=job_id, after=after), write=False
        )
        return [
            JobEvent(r["job_id"], r["seq"], r["kind"], loads(r["data"]), r["created_at"])
            for r in rows
        ]

    def _event(self, tx: Tx, job_id: str, kind: str, data: Any, now: float | None) -> None:
        seq = tx.one("bump_event_seq", job_id=job_id)
        assert seq is not None
        tx.run(
            "insert_event",
            job_id=job_id,
            seq=seq["event_seq"],
            kind=kind,
            data=dumps(data),
            now=now,
        )

    def record(self, job_id: str, kind: str, data: Any) -> None:
        """Append an entry to a job's log (errors of hooks, dispatch, and the like)."""
        now = self.now()
        self._transact(lambda tx: self._event(tx, job_id, kind, data, now))

    def _is_unique_violation(self, exc: BaseException) -> bool:
        return False

    # -- outbox -------------------------------------------------------------------------

    def claim_outbox(self, holder: str, *, limit: int, lease: float) -> list[OutboxItem]:
        """Take outbox items whose time has come (a crashed caller's dispatch, cancels)."""
        now = self.now()

        def work(tx: Tx) -> list[OutboxItem]:
            items = []
            for r in tx.all("outbox_candidates", now=now, limit=limit):
                got = tx.one(
                    "claim_outbox",
                    job_id=r["job_id"],
                    kind=r["kind"],
                    holder=holder,
                    lease=lease,
                    now=now,
                )
                if got is not None:
                    items.append(
                        OutboxItem(
                            r["job_id"],
                            r["kind"],
                            r["tool_name"],
                            loads(r["args"]) or {},
                            got["attempts"],
                        )
                    )
            return items

        return self._transact(work)

    def finish_outbox(self, job_id: str, kind: str) -> None:
        self._transact(lambda tx: tx.run("delete_outbox", job_id=job_id, kind=kind))

    def retry_outbox(self, item: OutboxItem, holder: str, *, error: str, delay: float) -> None:
        now = self.now()

        def work(tx: Tx) -> None:
            tx.run(
                "retry_outbox",
                job_id=item.job_id,
                kind=item.kind,
                holder=holder,
                error=error,
                delay=delay,
                now=now,
            )
            self._event(
                tx,
                item.job_id,
                f"{item.kind}_error",
                {"error": error, "attempt": item.attempts},
                now,
            )

        self._transact(work)
