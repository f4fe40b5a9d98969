"""Cron schedules in the store: the schedule row, its claimed occurrences, the runs it starts.

The store decides nothing about time: which occurrences are due and when the next one comes
are computed by :mod:`longcall.cron._scheduler` and handed in (``next_fire_at`` on create and
edit, a :class:`FirePlan` per due schedule when firing). What the store guarantees is
once-only: an occurrence is claimed by inserting ``(cron_id, fire_at)`` into
``lc_cron_fires``, and only the transaction whose insert went in acts on it, so any number of
schedulers (threads, processes, hosts) start exactly one run per occurrence.

Outcomes of a claimed occurrence (``lc_cron_fires.outcome``):

- ``fired``: a scheduled occurrence started a run;
- ``skipped``: a scheduled occurrence of a ``skip`` schedule found a run still active;
- ``triggered``: a run started by hand (:meth:`CronOps.trigger`), keyed at the trigger time;
- ``trigger_skipped``: a trigger of a ``skip`` schedule refused while a run was active.

``execution_count`` counts the runs the schedule started (``fired`` and ``triggered``), not
the occurrences it skipped; ``last_fire_at`` is the fire time of the latest of those runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from longcall.core.cron import ConcurrencyPolicy, Cron, CronFire, FireOutcome, MisfirePolicy
from longcall.errors import CronConflict, CronNotFound
from longcall.store.core import Row, StoreCore, Tx, dumps, loads
from longcall.store.runs import RUNS_CHANNEL

__all__ = [
    "CronOps",
    "FirePlan",
    "concurrency_key",
    "cron_from_row",
]

# Runs created in one transaction get creation times this far apart, so runs sharing a
# concurrency key (a 'queue' schedule catching up) start in occurrence order.
_CREATION_STEP = 1e-6


@dataclass(frozen=True, slots=True)
class FirePlan:
    """What a due schedule does now: the occurrences to act on (oldest first) and the time
    its next occurrence comes (None: never again)."""

    occurrences: Sequence[float]
    next_fire_at: float | None


def concurrency_key(cron_id: str) -> str:
    """The key a ``queue`` schedule's runs share, so they start one at a time, in order."""
    return f"cron:{cron_id}"


def _time(value: Any) -> float | None:
    # SQLite hands back a REAL that holds a whole number as an int (in RETURNING rows).
    return None if value is None else float(value)


def cron_from_row(row: Row) -> Cron:
    return Cron(
        cron_id=row["cron_id"],
        name=row["name"],
        workflow_id=row["workflow_id"],
        expression=row["expression"],
        timezone=row["timezone"],
        input=loads(row["input"]),
        concurrency_policy=ConcurrencyPolicy(row["concurrency_policy"]),
        misfire_policy=MisfirePolicy(row["misfire_policy"]),
        catch_up_max=row["catch_up_max"],
        paused=bool(row["paused"]),
        next_fire_at=_time(row["next_fire_at"]),
        last_fire_at=_time(row["last_fire_at"]),
        execution_count=row["execution_count"],
        user_id=row["user_id"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        queue=row["queue_name"],
    )


def _fire(row: Row) -> CronFire:
    return CronFire(
        cron_id=row["cron_id"],
        fire_at=float(row["fire_at"]),
        run_id=row["run_id"],
        outcome=FireOutcome(row["outcome"]),
        created_at=float(row["created_at"]),
    )


def _columns(cron: Cron) -> dict[str, Any]:
    """The parameters of ``insert_cron`` and ``update_cron`` (the columns a caller sets)."""
    return {
        "cron_id": cron.cron_id,
        "name": cron.name,
        "workflow_id": cron.workflow_id,
        "expression": cron.expression,
        "timezone": cron.timezone,
        "input": dumps(cron.input),
        "concurrency_policy": ConcurrencyPolicy(cron.concurrency_policy).value,
        "misfire_policy": MisfirePolicy(cron.misfire_policy).value,
        "catch_up_max": cron.catch_up_max,
        "paused": bool(cron.paused),
        "next_fire_at": cron.next_fire_at,
        "user_id": cron.user_id,
        "queue_name": cron.queue,
    }


class CronOps(StoreCore):
    """Cron schedules and their claimed occurrences; part of :class:`~longcall.store.Store`.

    Nothing here validates an expression or a time zone: :mod:`longcall.cron._scheduler`
    does, and computes every fire time.
    """

    def _is_unique_violation(self, exc: BaseException) -> bool:
        return False  # each backend says (the Store and its backends override this)

    def create_cron(
        self,
        cron_id: str,
        name: str,
        workflow_id: str,
        expression: str,
        *,
        next_fire_at: float | None,
        timezone: str = "UTC",
        input: Any = None,
        concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.SKIP,
        misfire_policy: MisfirePolicy = MisfirePolicy.SKIP,
        catch_up_max: int = 0,
        paused: bool = False,
        user_id: str | None = None,
        queue: str | None = None,
    ) -> Cron:
        """Create the schedule; :class:`CronConflict` when its id or name is taken (a repeated
        call included: nothing is changed)."""
        now = self.now()
        draft = Cron(
            cron_id=cron_id,
            name=name,
            workflow_id=workflow_id,
            expression=expression,
            timezone=timezone,
            input=input,
            concurrency_policy=concurrency_policy,
            misfire_policy=misfire_policy,
            catch_up_max=catch_up_max,
            paused=paused,
            next_fire_at=next_fire_at,
            last_fire_at=None,
            execution_count=0,
            user_id=user_id,
            created_at=0.0,
            updated_at=0.0,
            queue=queue,
        )

        def work(tx: Tx) -> Cron:
            row = tx.one("insert_cron", now=now, **_columns(draft))
            if row is None:
                raise CronConflict(cron_id, name)
            return cron_from_row(row)

        return self._transact(work)

    def get_cron(self, cron_id: str) -> Cron:
        row = self._transact(lambda tx: tx.one("get_cron", cron_id=cron_id), write=False)
        if row is None:
            raise CronNotFound(cron_id)
        return cron_from_row(row)

    def get_cron_by_name(self, name: str) -> Cron:
        row = self._transact(lambda tx: tx.one("get_cron_by_name", name=name), write=False)
        if row is None:
            raise CronNotFound(name)
        return cron_from_row(row)

    def list_cron(
        self,
        *,
        user_id: str | None = None,
        workflow_id: str | None = None,
        paused: bool | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> list[Cron]:
        """Schedules by name; ``after`` is the name of the last schedule of a page."""
        params = {
            "user_id": user_id,
            "workflow_id": workflow_id,
            "paused": paused,
            "after": after,
            "limit": limit,
        }
        rows = self._transact(lambda tx: tx.all("list_cron", **params), write=False)
        return [cron_from_row(r) for r in rows]

    def update_cron(self, cron_id: str, edit: Callable[[Cron], Cron]) -> Cron:
        """Replace the schedule by ``edit(current)`` in one transaction (the row is locked while
        ``edit`` runs, so concurrent edits apply one after the other). ``edit`` sets every
        column a caller may change, ``next_fire_at`` included; the id, counters and
        timestamps are the store's. :class:`CronNotFound` when there is no such schedule,
        :class:`CronConflict` when the new name is taken."""
        now = self.now()

        def work(tx: Tx) -> Cron:
            row = tx.one("lock_cron", cron_id=cron_id)
            if row is None:
                raise CronNotFound(cron_id)
            new = edit(cron_from_row(row))
            columns = _columns(new) | {"cron_id": cron_id}
            try:
                updated = tx.one("update_cron", now=now, **columns)
            except Exception as exc:  # the unique name
                if not self._is_unique_violation(exc):
                    raise
                raise CronConflict(cron_id, new.name) from exc
            assert updated is not None
            return cron_from_row(updated)

        return self._transact(work)

    def delete_cron(self, cron_id: str) -> bool:
        """Delete the schedule and its occurrence record; False when there was none. Runs it
        started stay, and go on."""
        return self._transact(lambda tx: tx.run("delete_cron", cron_id=cron_id)) > 0

    def next_cron_due(self) -> float | None:
        """The earliest ``next_fire_at`` of the schedules not paused (None: nothing to fire)."""
        row = self._transact(lambda tx: tx.one("next_cron_due"), write=False)
        return None if row is None or row["at"] is None else float(row["at"])

    def fire_due(
        self,
        now: float,
        plan: Callable[[Cron], FirePlan],
        *,
        limit: int = 100,
        versions: Mapping[str, str] | None = None,
    ) -> tuple[list[CronFire], int]:
        """Fire up to ``limit`` due schedules (not paused, ``next_fire_at <= now``), soonest
        first, in one transaction: for each, ``plan(schedule)`` says which occurrences to act
        on and when the next one comes; each occurrence is claimed, then starts a run or is
        skipped by the concurrency policy, and the schedule moves on to ``next_fire_at``.

        Returns the occurrences this call claimed and how many schedules it took. On
        PostgreSQL a schedule another scheduler holds is skipped (it fires there); a claim
        already made (by anyone) is not acted on again, so repeating the call is harmless.
        A run records ``versions[workflow_id]`` as its version ("1" for a workflow not in it).
        """

        def work(tx: Tx) -> tuple[list[CronFire], int]:
            fires: list[CronFire] = []
            rows = tx.all("due_crons", now=now, limit=limit)
            for row in rows:
                cron = cron_from_row(row)
                decided = plan(cron)
                fires += self._fire_occurrences(
                    tx,
                    cron,
                    decided.occurrences,
                    now,
                    next_fire_at=decided.next_fire_at,
                    versions=versions,
                )
            return fires, len(rows)

        fires, taken = self._transact(work)
        if any(f.outcome.started for f in fires):
            self._runs_queued()  # (PostgreSQL's workers heard of them at the commit)
        return fires, taken

    def trigger(
        self,
        cron_id: str,
        now: float,
        *,
        force: bool = False,
        versions: Mapping[str, str] | None = None,
    ) -> CronFire:
        """Start a run now, outside the schedule's occurrences, recorded at ``now`` as
        ``triggered``. The concurrency policy applies: ``queue`` waits behind the schedule's
        runs, ``skip`` refuses (``trigger_skipped``, no run) while a run is active unless
        ``force``. ``next_fire_at`` does not move. A repeated call at the same ``now``
        returns the first call's record. :class:`CronNotFound` when there is no schedule.
        """

        def work(tx: Tx) -> CronFire:
            row = tx.one("lock_cron", cron_id=cron_id)
            if row is None:
                raise CronNotFound(cron_id)
            cron = cron_from_row(row)
            fired = self._fire_occurrences(
                tx,
                cron,
                [now],
                now,
                next_fire_at=cron.next_fire_at,
                trigger=True,
                force=force,
                versions=versions,
            )
            if fired:
                return fired[0]
            existing = tx.one("get_cron_fire", cron_id=cron_id, fire_at=now)
            assert existing is not None  # the claim that stopped ours
            return _fire(existing)

        fire = self._transact(work)
        if fire.outcome.started:
            self._runs_queued()
        return fire

    def _fire_occurrences(
        self,
        tx: Tx,
        cron: Cron,
        occurrences: Sequence[float],
        now: float,
        *,
        next_fire_at: float | None,
        trigger: bool = False,
        force: bool = False,
        versions: Mapping[str, str] | None = None,
    ) -> list[CronFire]:
        """Claim each occurrence, act on those this transaction claimed, move the schedule."""
        fires: list[CronFire] = []
        active: int | None = None
        started = 0
        last: float | None = None
        skip = cron.concurrency_policy is ConcurrencyPolicy.SKIP and not force
        key = (
            concurrency_key(cron.cron_id)
            if cron.concurrency_policy is ConcurrencyPolicy.QUEUE
            else None
        )
        for at in occurrences:
            if skip:
                if active is None:
                    counted = tx.one("cron_active_runs", cron_id=cron.cron_id)
                    active = int(counted["n"]) if counted else 0
                start = active == 0
            else:
                start = True
            if trigger:
                outcome = FireOutcome.TRIGGERED if start else FireOutcome.TRIGGER_SKIPPED
            else:
                outcome = FireOutcome.FIRED if start else FireOutcome.SKIPPED
            run_id = f"run-{uuid.uuid4().hex}" if start else None
            claimed = tx.one(
                "claim_cron_fire",
                cron_id=cron.cron_id,
                fire_at=at,
                run_id=run_id,
                outcome=outcome.value,
                now=now,
            )
            if claimed is None:
                continue  # someone claimed this occurrence first: it is theirs
            if start:
                tx.one(
                    "insert_run",
                    run_id=run_id,
                    workflow_id=cron.workflow_id,
                    status="queued",
                    input=dumps(cron.input),
                    user_id=cron.user_id,
                    job_id=None,
                    idempotency_key=None,
                    max_retries=0,
                    timeout_secs=None,
                    holder=None,
                    lease=0.0,
                    now=now + started * _CREATION_STEP,
                    cron_id=cron.cron_id,
                    concurrency_key=key,
                    version=(versions or {}).get(cron.workflow_id, "1"),
                    queue_name=cron.queue,
                    priority=0,
                    dedupe_id=None,
                    channel=RUNS_CHANNEL,  # PostgreSQL's workers hear of it at the commit
                )
                started += 1
                last = at if last is None else max(last, at)
                if active is not None:
                    active += 1
            fires.append(_fire(claimed))
        tx.run(
            "cron_fired",
            cron_id=cron.cron_id,
            next_fire_at=next_fire_at,
            last_fire_at=last,
            started=started,
        )
        return fires

    def active_run_count(self, cron_id: str) -> int:
        """The schedule's runs that are queued, running or waiting for input."""
        row = self._transact(lambda tx: tx.one("cron_active_runs", cron_id=cron_id), write=False)
        return int(row["n"]) if row else 0

    def cron_fires(
        self, cron_id: str, *, before: float | None = None, limit: int = 50
    ) -> list[CronFire]:
        """The schedule's claimed occurrences, newest first; ``before`` is the ``fire_at`` of
        the last one of a page."""
        rows = self._transact(
            lambda tx: tx.all("cron_fires", cron_id=cron_id, before=before, limit=limit),
            write=False,
        )
        return [_fire(r) for r in rows]

    def prune_cron_fires(self, before: float) -> int:
        """Forget claimed occurrences recorded before ``before``; how many went. (A schedule
        never fires an occurrence older than its ``next_fire_at``, so old claims only
        matter as history.)"""
        return self._transact(lambda tx: tx.run("prune_cron_fires", before=before))
