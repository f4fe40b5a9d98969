"""Workflow runs in the store: the run row, a checkpoint per task call, interrupts, events.

Every write that belongs to an execution is fenced by the run's holder: a run taken over by
another worker (its lease ran out) is no longer written to by the one that lost it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from longcall.core.runs import (
    Interrupt,
    Run,
    RunBacklog,
    RunEvent,
    RunStatus,
    RunVersion,
    Step,
)
from longcall.errors import DuplicateRun, RunNotFound, RunStateError
from longcall.store.core import Row, StoreCore, Tx, dumps, loads


def run_from_row(row: Row) -> Run:
    return Run(
        run_id=row["run_id"],
        workflow_id=row["workflow_id"],
        status=RunStatus.SLEEPING
        if row["status"] == "queued"
        and (row["wake_at"] is not None or row["recv_topic"] is not None)
        else RunStatus(row["status"]),
        input=loads(row["input"]),
        result=loads(row["result"]),
        error=loads(row["error"]),
        state=loads(row["state"]) or {},
        user_id=row["user_id"],
        job_id=row["job_id"],
        cron_id=row["cron_id"],
        concurrency_key=row["concurrency_key"],
        idempotency_key=row["idempotency_key"],
        attempts=row["attempts"],
        executions=row["executions"],
        max_retries=row["max_retries"],
        timeout_secs=row["timeout_secs"],
        errors=loads(row["errors"]) or [],
        cancel_requested=bool(row["cancel_requested"]),
        holder=row["holder"],
        lease_expires_at=row["lease_expires_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        wake_at=row["wake_at"],
        recv_topic=row["recv_topic"],
        parent_run_id=row["parent_run_id"],
        version=row["version"],
        forked_from=row["forked_from"],
        forked_step=row["forked_step"],
        queue_name=row["queue_name"],
        priority=row["priority"],
        dedupe_id=row["dedupe_id"],
    )


def _step(row: Row) -> Step:
    return Step(
        position=row["position"],
        name=row["name"],
        args_hash=row["args_hash"],
        ok=bool(row["ok"]),
        result=loads(row["result"]),
        changes=[(name, update) for name, update in loads(row["changes"])],
        attempts=row["attempts"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def _interrupt(row: Row) -> Interrupt:
    return Interrupt(
        key=row["key"],
        prompt=row["prompt"],
        schema=loads(row["schema"]),
        value=loads(row["value"]),
        supplied=row["value"] is not None,
        answered=bool(row["answered"]),
        error=loads(row["error"]),
        asked_at=row["asked_at"],
        answered_at=row["answered_at"],
    )


# A run held to execute, with what it recorded so far: (run, steps, interrupts).
Held = tuple[Run, list[Step], dict[str, Interrupt]]


@dataclass(slots=True)
class NextClaim:
    """What a worker claims in the statement that ends one of its runs: up to ``limit`` runs
    for ``holder``, handed to ``take`` (called in the thread that ended the run); nothing
    once ``wanted`` says no (the worker is stopping). ``looked`` is set once the statement
    has looked, found runs or not: the worker need not look again."""

    holder: str
    lease: float
    limit: int
    take: Callable[[list[Held]], None]
    wanted: Callable[[], bool] = lambda: True
    looked: bool = False
    registered: Collection[tuple[str, str]] | None = None  # as for ``claim_runs``


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A task call's checkpoint (whether it succeeded aside). One that succeeded may be held
    back to be written with what the run records next: its end, usually (one commit, not two)."""

    position: int
    name: str
    args_hash: str
    result: Any
    changes: list[tuple[str, Any]]
    attempts: int
    started_at: float
    finished_at: float

    def _values(self) -> dict[str, Any]:
        # The step's columns, named alike by insert_step and (``step_``) by claim_runs.
        return {
            "position": self.position,
            "name": self.name,
            "args_hash": self.args_hash,
            "result": dumps(self.result),
            "changes": dumps(self.changes),
            "attempts": self.attempts,
            "started_at": self.started_at,
        }

    def params(self) -> dict[str, Any]:
        """claim_runs's ``step_*`` parameters."""
        values = {**self._values(), "finished_at": self.finished_at}
        return {f"step_{name}": value for name, value in values.items()}

    def row(self, run_id: str, holder: str, ok: bool) -> dict[str, Any]:
        """insert_step's parameters."""
        return {
            "run_id": run_id,
            "holder": holder,
            "ok": ok,
            "now": self.finished_at,
            **self._values(),
        }

    def insert(self, tx: Tx, run_id: str, holder: str) -> bool:
        """Write it, as succeeded, in ``tx``; False when the run is no longer ``holder``'s."""
        return tx.one("insert_step", **self.row(run_id, holder, True)) is not None


# claim_runs's parameters for writing no checkpoint, and for ending nothing.
_NO_STEP = dict.fromkeys(Checkpoint(0, "", "", None, [], 0, 0.0, 0.0).params())
_NO_END = dict.fromkeys(
    ("end_run_id", "end_holder", "status", "result", "error", "state", "wake_at", "recv_topic")
)
_NO_END |= _NO_STEP


def due_in(run: Run, lease: float) -> float:
    """How long after its claim a run taken by ``claim_runs(ahead=...)`` is due: 0 or less
    for one due at once. Measured on the database's clock alone (the claim's time is its
    lease's expiry less the lease), so the worker's own clock being off does not start it
    early."""
    if run.lease_expires_at is None:
        return 0.0
    return run.updated_at - (run.lease_expires_at - lease)


def registered_param(registered: Collection[tuple[str, str]] | None) -> str | None:
    """claim_runs's ``registered``: the (workflow id, version) pairs as a JSON array of
    pairs, sorted (one text for one set); None claims runs of any."""
    return None if registered is None else dumps(sorted([w, v] for w, v in registered))


# The error a cancelled run ends with, wherever it was when it was cancelled.
CANCELLED = {"type": "Cancelled", "message": "the run was cancelled"}

# Workers listen here (PostgreSQL) for runs to execute; others poll.
RUNS_CHANNEL = "longcall_runs"


class RunOps(StoreCore):
    """Workflow runs; part of :class:`~longcall.store.Store`."""

    # Whether the single statement that ends a run can write its last checkpoint too; where
    # it cannot, a checkpoint is not held back (each is committed as its task returns).
    merges_checkpoints = False

    def create_run(
        self,
        run_id: str,
        workflow_id: str,
        input: Any,
        *,
        holder: str | None = None,
        lease: float = 0.0,
        user_id: str | None = None,
        job_id: str | None = None,
        cron_id: str | None = None,
        concurrency_key: str | None = None,
        idempotency_key: str | None = None,
        max_retries: int = 0,
        timeout_secs: float | None = None,
        version: str = "1",
        queue_name: str | None = None,
        priority: int = 0,
        dedupe_id: str | None = None,
    ) -> tuple[Run, bool]:
        """Create the run: held by ``holder`` to execute at once, or queued for a worker.
        The existing one if the id or the idempotency key is taken (True when created).
        ``version``: the version of the workflow that starts it (only workers that have
        registered it claim the run). A ``dedupe_id`` that an active run of ``queue_name``
        has raises DuplicateRun."""
        encoded = dumps(input)
        rows = self._statement(
            "insert_run",
            run_id=run_id,
            workflow_id=workflow_id,
            status="running" if holder else "queued",
            input=encoded,
            user_id=user_id,
            job_id=job_id,
            cron_id=cron_id,
            concurrency_key=concurrency_key,
            idempotency_key=idempotency_key,
            max_retries=max_retries,
            timeout_secs=timeout_secs,
            version=version,
            holder=holder,
            lease=lease,
            queue_name=queue_name,
            priority=priority,
            dedupe_id=dedupe_id,
            channel=RUNS_CHANNEL,
            now=self.now(),
        )
        if rows:
            if holder is None:
                self._runs_queued()
            # The row as inserted, from what was sent and what the insert returned (its
            # clock, the lease): reading it all back costs a submit about a tenth more.
            inserted = rows[0]
            created = Run(
                run_id=run_id,
                workflow_id=workflow_id,
                status=RunStatus(inserted["status"]),
                input=loads(encoded),  # as stored: a tuple comes back a list
                result=None,
                error=None,
                state={},
                user_id=user_id,
                job_id=job_id,
                cron_id=cron_id,
                concurrency_key=concurrency_key,
                idempotency_key=idempotency_key,
                attempts=0,
                executions=0 if holder is None else 1,
                max_retries=max_retries,
                timeout_secs=timeout_secs,
                errors=[],
                cancel_requested=False,
                holder=holder,
                lease_expires_at=inserted["lease_expires_at"],
                created_at=inserted["created_at"],
                updated_at=inserted["created_at"],
                finished_at=None,
                version=version,
                queue_name=queue_name,
                priority=priority,
                dedupe_id=dedupe_id,
            )
            return created, True

        def existing(tx: Tx) -> Row | None:
            row = tx.one("get_run", run_id=run_id)
            if row is None and idempotency_key is not None:
                row = tx.one("run_by_idempotency_key", key=idempotency_key)
            if row is None and dedupe_id is not None:
                active = tx.one("active_dedupe", name=queue_name, dedupe_id=dedupe_id)
                if active is not None:
                    raise DuplicateRun(str(queue_name), dedupe_id, active["run_id"])
            return row

        row = self._transact(existing, write=False)
        if row is None:  # pragma: no cover - a conflict leaves one of the two
            raise RunNotFound(run_id)
        return run_from_row(row), False

    def get_run(self, run_id: str) -> Run:
        row = self._transact(lambda tx: tx.one("get_run", run_id=run_id), write=False)
        if row is None:
            raise RunNotFound(run_id)
        return run_from_row(row)

    def hold_run(
        self,
        run_id: str,
        holder: str,
        *,
        lease: float,
        answers: Mapping[str, Any] | None = None,
        check: Callable[[Run, dict[str, Interrupt]], None] | None = None,
    ) -> Held | None:
        """In one transaction: ``check`` the run (it raises to refuse, and nothing is
        written), store ``answers`` to its interrupts, take it, and read its record. None
        when it is not there to take (held, ended, cancelled)."""
        now = self.now()

        def work(tx: Tx) -> Held | None:
            row = tx.one("get_run", run_id=run_id)
            if row is None:
                raise RunNotFound(run_id)
            interrupts = {r["key"]: _interrupt(r) for r in tx.all("run_interrupts", run_id=run_id)}
            if check is not None:
                check(run_from_row(row), interrupts)
            for key, value in (answers or {}).items():
                tx.run("answer_interrupt", run_id=run_id, key=key, value=dumps(value), now=now)
            taken = tx.one("take_run", run_id=run_id, holder=holder, lease=lease, now=now)
            if taken is None:
                return None
            if answers:
                rows = tx.all("run_interrupts", run_id=run_id)
                interrupts = {r["key"]: _interrupt(r) for r in rows}
            steps = [_step(r) for r in tx.all("run_steps", run_id=run_id)]
            return run_from_row(taken), steps, interrupts

        return self._transact(work)

    def claim_runs(
        self,
        holder: str,
        *,
        limit: int,
        lease: float,
        registered: Collection[tuple[str, str]] | None = None,
        ahead: float = 0.0,
    ) -> list[Held]:
        """Take up to ``limit`` runs to execute: abandoned ones (their holder's lease ran
        out) first, then queued ones; each with its record when it executed before. With
        ``registered`` ((workflow id, version) pairs), only runs of those.

        ``ahead`` seconds: queued runs due that much later are taken too (a sleeping run's
        claim done before it wakes), each with ``updated_at`` its due time; the caller must
        not start one before then (:func:`due_in`)."""
        rows = self._statement(
            "claim_runs",
            holder=holder,
            lease=lease,
            limit=limit,
            ahead=ahead,
            now=self.now(),
            **_NO_END,
            registered=registered_param(registered),
        )
        return self._held(rows)

    def _held(self, rows: list[Row]) -> list[Held]:
        runs = sorted(map(run_from_row, rows), key=lambda r: (r.created_at, r.run_id))
        # Resumed, retried or taken over, or a fork (its first steps are copies): replay its
        # record, read for all such runs of the claim at once.
        replayed = [r.run_id for r in runs if r.executions > 1 or r.forked_from is not None]
        if not replayed:
            return [(run, [], {}) for run in runs]
        steps: dict[str, list[Step]] = {}
        interrupts: dict[str, dict[str, Interrupt]] = {}

        def read(tx: Tx) -> None:
            for row in tx.all("runs_steps", run_ids=dumps(replayed)):
                steps.setdefault(row["run_id"], []).append(_step(row))
            for row in tx.all("runs_interrupts", run_ids=dumps(replayed)):
                interrupts.setdefault(row["run_id"], {})[row["key"]] = _interrupt(row)

        self._transact(read, write=False)
        return [(run, steps.get(run.run_id, []), interrupts.get(run.run_id, {})) for run in runs]

    def retry_run(
        self, run_id: str, holder: str, *, error: Any, delay: float, step: Checkpoint | None = None
    ) -> Run | None:
        """Put a failed attempt back in the queue after ``delay`` seconds; its completed
        checkpoints stay (``step`` written first), its failed ones go (so those tasks run
        again)."""
        now = self.now()

        def work(tx: Tx) -> Run | None:
            if step is not None and not step.insert(tx, run_id, holder):
                return None
            row = tx.one(
                "retry_run", run_id=run_id, holder=holder, error=dumps(error), delay=delay, now=now
            )
            if row is None:
                return None
            tx.run("drop_failed_steps", run_id=run_id)
            tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
            return run_from_row(row)

        retried = self._transact(work)
        if retried is not None:
            self._runs_queued()
        return retried

    def queue_answered(
        self,
        run_id: str,
        answers: Mapping[str, Any],
        check: Callable[[Run, dict[str, Interrupt]], None],
    ) -> Run:
        """Store answers to a waiting run (after ``check``) and queue it for a worker."""
        now = self.now()

        def work(tx: Tx) -> Run:
            # Locked first, so a rival answer committed meanwhile is what check() sees.
            row = tx.one("lock_run", run_id=run_id)
            if row is None:
                raise RunNotFound(run_id)
            interrupts = {r["key"]: _interrupt(r) for r in tx.all("run_interrupts", run_id=run_id)}
            check(run_from_row(row), interrupts)
            for key, value in answers.items():
                tx.run("answer_interrupt", run_id=run_id, key=key, value=dumps(value), now=now)
            queued = tx.one("queue_run", run_id=run_id, now=now)
            if queued is None:  # pragma: no cover - check() saw it waiting, and it is locked
                raise RunStateError(f"run {run_id} is no longer waiting for answers")
            tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
            return run_from_row(queued)

        queued = self._transact(work)
        self._runs_queued()
        return queued

    def cancelling_runs(self, holder_prefix: str) -> set[str]:
        """The runs held by holders starting with ``holder_prefix`` that someone asked to
        cancel."""
        pattern = holder_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._transact(lambda tx: tx.all("cancelling_runs", pattern=pattern), write=False)
        return {r["run_id"] for r in rows}

    def renew_runs(
        self, held: Sequence[tuple[str, str]], *, lease: float
    ) -> dict[tuple[str, str], bool]:
        """Extend the leases of ``held`` (run id, holder) pairs in one statement: the runs
        still ours, each with whether someone asked for it to stop."""
        rows = self._statement(
            "renew_runs",
            held=dumps([{"run_id": run_id, "holder": holder} for run_id, holder in held]),
            lease=lease,
            now=self.now(),
        )
        return {(r["run_id"], r["holder"]): bool(r["cancel_requested"]) for r in rows}

    def end_run(
        self,
        run_id: str,
        holder: str,
        status: RunStatus,
        *,
        state: dict[str, Any],
        result: Any = None,
        error: Any = None,
        asked: Sequence[tuple[str, str, dict[str, Any] | None, Any]] = (),
        consumed: Sequence[str] = (),
        for_job: bool = True,
        then_claim: NextClaim | None = None,
        step: Checkpoint | None = None,
        wake_at: float | None = None,
        recv_topic: str | None = None,
    ) -> Run | None:
        """Record where the run stands (``QUEUED`` with ``wake_at``: asleep until then), with
        the interrupts it asked (key, prompt, schema, error) and the answers it consumed, and
        its last checkpoint (``step``) if held back; None when the run is no longer ours.

        ``for_job=False`` says the run does no job's work; then, with nothing asked or
        consumed, the end is a single statement (its checkpoint included, where the store
        :attr:`merges_checkpoints`), which also makes ``then_claim``'s claim once the end is
        recorded."""
        now = self.now()
        params = {
            "run_id": run_id,
            "holder": holder,
            "status": status.value,
            "result": dumps(result),
            "error": None if error is None else dumps(error),
            "state": dumps(state),
            "wake_at": wake_at,
            "recv_topic": recv_topic,
            "now": now,
            **_NO_STEP,
        }
        # A child's end wakes its parent, and a parent suspending on a child looks at it,
        # in the end's transaction.
        waits_child = recv_topic is not None and recv_topic.startswith("longcall.child:")
        single = not for_job and not asked and not consumed and not waits_child
        if single and step is not None and self.merges_checkpoints:
            params |= step.params()
        elif step is not None:
            single = False  # written in the end's transaction, before it
        # claim_runs ends the run, and with ``limit`` 0 claims nothing after it.
        ending = {**params, "end_run_id": run_id, "end_holder": holder, "lease": 0.0, "limit": 0}
        ending["ahead"] = 0.0  # whatever it claims starts at once
        ending["registered"] = None
        if single:
            claim = then_claim if then_claim is not None and then_claim.wanted() else None
            if claim is not None:
                ending |= {"holder": claim.holder, "lease": claim.lease, "limit": claim.limit}
                ending["registered"] = registered_param(claim.registered)
            rows = self._statement("claim_runs", **ending)
            done = [run_from_row(r) for r in rows if r["kind"] == "ended"]
            if claim is not None:
                claimed = self._held([r for r in rows if r["kind"] == "claimed"])
                if claimed:
                    claim.take(claimed)
                claim.looked = bool(done)  # it claims only once the end is recorded
            return done[0] if done else None

        def work(tx: Tx) -> Run | None:
            if step is not None and not step.insert(tx, run_id, holder):
                return None
            for key, prompt, schema, problem in asked:
                tx.run(
                    "ask_interrupt",
                    run_id=run_id,
                    key=key,
                    prompt=prompt,
                    schema=None if schema is None else dumps(schema),
                    error=None if problem is None else dumps(problem),
                    now=now,
                )
            for key in consumed:
                tx.run("consume_interrupt", run_id=run_id, key=key)
            rows = tx.all("claim_runs", **ending)
            if not rows:
                return None
            ended = run_from_row(rows[0])
            if ended.job_id is not None and status.terminal:
                # The run did a long-running tool's work: its end is the job's result, in
                # the same transaction, so neither can happen without the other.
                woke.append(self._run_ended_in(tx, ended, now))
            if ended.parent_run_id is not None and status.terminal:
                queued.append(self._wake_parent(tx, ended, now))
            if waits_child and recv_topic is not None:
                queued.append(self._wake_for_child(tx, run_id, recv_topic, now))
            return ended

        woke: list[bool] = []
        queued: list[bool] = []
        ended = self._transact(work)
        if any(woke):
            self._after_ready()
        if any(queued):
            self._runs_queued()
        return ended

    def _run_ended_in(self, tx: Tx, run: Run, now: float | None) -> bool:
        """Finish the job whose work ``run`` was; True when that made a delivery ready."""
        raise NotImplementedError

    # Child workflows (see _run_children.py): the hooks a run's end and cancel call.
    def _wake_parent(self, tx: Tx, run: Run, now: float | None) -> bool:
        raise NotImplementedError

    def _wake_for_child(self, tx: Tx, run_id: str, topic: str, now: float | None) -> bool:
        raise NotImplementedError

    def _cancel_children(self, tx: Tx, parent_run_id: str, now: float | None) -> None:
        raise NotImplementedError

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow_id: str | None = None,
        user_id: str | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
        version: str | None = None,
    ) -> list[Run]:
        """Newest first; ``before`` is the (created_at, run_id) of the last run of a page."""
        params = {
            "status": status.value if status else None,
            "workflow_id": workflow_id,
            "version": version,
            "user_id": user_id,
            "before_created": before[0] if before else None,
            "before_id": before[1] if before else None,
            "limit": limit,
        }
        rows = self._transact(lambda tx: tx.all("list_runs", **params), write=False)
        return [run_from_row(r) for r in rows]

    def run_backlog(self) -> RunBacklog:
        """The runs not finished, by status, and the oldest queued (one index's entries)."""
        rows = self._transact(lambda tx: tx.all("run_backlog"), write=False)
        counts = {status: 0 for status in ("queued", "running", "waiting_input", "sleeping")}
        oldest = None
        for row in rows:
            counts[row["status"]] = int(row["n"])
            if row["status"] == "queued":
                oldest = row["oldest"]
        return RunBacklog(counts, oldest)

    def run_versions(
        self, *, workflow_id: str | None = None, user_id: str | None = None
    ) -> list[RunVersion]:
        """Per workflow and version, its runs not finished by status; only versions that
        have some, ordered by workflow and version."""
        rows = self._transact(
            lambda tx: tx.all("run_versions", workflow_id=workflow_id, user_id=user_id),
            write=False,
        )
        found: dict[tuple[str, str], RunVersion] = {}
        for row in rows:
            key = (row["workflow_id"], row["version"])
            if key not in found:
                counts = dict.fromkeys(("queued", "running", "waiting_input", "sleeping"), 0)
                found[key] = RunVersion(key[0], key[1], counts, row["oldest"])
            entry = found[key]
            entry.counts[row["status"]] = int(row["n"])
            if row["oldest"] < entry.oldest_created_at:
                found[key] = RunVersion(key[0], key[1], entry.counts, row["oldest"])
        return list(found.values())

    def runs_of_job(self, job_id: str) -> list[Run]:
        """The background runs doing the work of the job ``job_id``, oldest first (usually
        one: ``submit_run(job=...)`` keys it by the job)."""
        rows = self._transact(lambda tx: tx.all("runs_of_job", job_id=job_id), write=False)
        return [run_from_row(r) for r in rows]

    def run_steps(self, run_id: str) -> list[Step]:
        rows = self._transact(lambda tx: tx.all("run_steps", run_id=run_id), write=False)
        return [_step(r) for r in rows]

    def database_now(self) -> float:
        """The database's clock (a fake clock's time in tests): timers wake on it."""
        row = self._transact(lambda tx: tx.one("database_now", now=self.now()), write=False)
        assert row is not None
        return float(row["now"])

    def record_step(
        self, run_id: str, holder: str, step: Checkpoint, *, ok: bool
    ) -> tuple[bool, bool]:
        """Commit a task call's checkpoint: (written, cancelling). Not written when the run is
        no longer ours; cancelling once someone asked for the run to stop."""
        rows = self._statement("insert_step", **step.row(run_id, holder, ok))
        return bool(rows), bool(rows and rows[0]["cancel_requested"])

    def run_interrupts(self, run_id: str) -> dict[str, Interrupt]:
        rows = self._transact(lambda tx: tx.all("run_interrupts", run_id=run_id), write=False)
        return {r["key"]: _interrupt(r) for r in rows}

    def emit_run_event(self, run_id: str, origin: str, kind: str, data: Any) -> None:
        """Append to the run's event log; an origin already there (a replayed emit) is a no-op."""
        now = self.now()
        self._transact(
            lambda tx: tx.run(
                "insert_run_event",
                run_id=run_id,
                origin=origin,
                kind=kind,
                data=dumps(data),
                now=now,
            )
        )

    def run_events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        rows = self._transact(
            lambda tx: tx.all("run_events", run_id=run_id, after=after), write=False
        )
        return [RunEvent(r["seq"], r["kind"], loads(r["data"]), r["created_at"]) for r in rows]

    def request_run_cancel(self, run_id: str) -> Run | None:
        """Ask for the run to be cancelled; None when it had already ended (or is unknown)."""
        now = self.now()
        woke: list[bool] = []
        queued: list[bool] = []

        def work(tx: Tx) -> Run | None:
            woke.clear()
            queued.clear()
            row = tx.one("request_run_cancel", run_id=run_id, error=dumps(CANCELLED), now=now)
            if row is None:
                return None
            run = run_from_row(row)
            if run.status is RunStatus.CANCELLED and run.job_id is not None:
                woke.append(self._run_ended_in(tx, run, now))  # a queued or waiting run
            if run.status is RunStatus.CANCELLED and run.parent_run_id is not None:
                queued.append(self._wake_parent(tx, run, now))
            self._cancel_children(tx, run_id, now)
            return run

        cancelled = self._transact(work)
        if any(woke):
            self._after_ready()
        if any(queued):
            self._runs_queued()
        return cancelled
