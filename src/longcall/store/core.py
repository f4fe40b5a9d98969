"""What every part of the store shares: the transaction protocol, JSON in columns, the clock.

:class:`StoreCore` is the base of the store's operation groups (jobs in ``base.py``, sessions
in ``sessions.py``); a database backend implements its one abstract method, ``_transact``.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from longcall.core.clock import Clock
from longcall.core.jobs import Delivery, Job, JobState
from longcall.errors import InvalidValue, StoreUnavailable
from longcall.store import queries as sql

T = TypeVar("T")
Row = Mapping[str, Any]

NOTIFY_CHANNEL = "longcall"


class Tx(Protocol):
    """One open transaction: runs named queries of the store's dialect."""

    def one(self, query: str, **params: Any) -> Row | None: ...

    def all(self, query: str, **params: Any) -> list[Row]: ...

    def run(self, query: str, **params: Any) -> int:
        """Execute and return the number of rows changed."""
        ...


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(value: Any) -> Any:
    return None if value is None else json.loads(value)


def contains_pattern(text: str) -> str:
    """A LIKE pattern (``ESCAPE '\\'``) matching values that contain ``text``, its own
    ``%``, ``_`` and ``\\`` taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class RetryGate:
    """What a store's retry loops share: the trouble they are in, and a way to end them.

    A loop reports each transient failure (:meth:`failed`) and each success
    (:meth:`succeeded`), so ``/readyz`` can say the store is failing (:meth:`trouble`) while
    requests wait in retries. It waits between attempts with :meth:`pause`, which a shutdown
    (:meth:`stop`) cuts short: a process told to stop does not wait out a minute of retries.
    """

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._trouble: tuple[float, str] | None = None  # (since, the latest error)
        self.retried = 0  # transient failures seen, each followed by a retry or giving up

    def failed(self, reason: str) -> None:
        self.retried += 1
        since = time.monotonic() if self._trouble is None else self._trouble[0]
        self._trouble = (since, reason)

    def broke(self, error: Exception) -> None:
        """Record an error that is not retried but says the store itself is in trouble (a
        full disk, a missing table); a value the store refused (InvalidValue) is not."""
        if not isinstance(error, InvalidValue):
            since = time.monotonic() if self._trouble is None else self._trouble[0]
            self._trouble = (since, str(error))

    def succeeded(self) -> None:
        self._trouble = None

    def trouble(self) -> str | None:
        """What has been failing, and for how long, or None while the store works."""
        trouble = self._trouble
        if trouble is None:
            return None
        since, reason = trouble
        return f"the store has been failing for {time.monotonic() - since:.0f} s: {reason}"

    def pause(self, seconds: float) -> None:
        """Wait before the next attempt; StoreUnavailable at once if the store was stopped."""
        if self._stopped.wait(seconds):
            raise StoreUnavailable("the store stopped retrying: the process is shutting down")

    def stop(self) -> None:
        """End every retry loop (at its next pause) and refuse further retries."""
        self._stopped.set()

    def restart(self) -> None:
        """Allow retries again (a server started again on the same store)."""
        self._stopped.clear()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()


class StoreCore(ABC):
    """Transactions, the clock and wake-ups: what each group of store operations builds on."""

    dialect: str
    # Whether session leases may commit without their own fsync. True where every process
    # that can hold a lease runs on the database's machine (SQLite): a power cut that loses
    # a lease write also ends every holder that could act on it, so no fence is ever seen
    # twice. Not for PostgreSQL, whose holders on other hosts outlive its crash.
    relaxed_leases = False

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._queries = sql.queries(self.dialect)
        # Called (from any thread) after a commit made a job ready or freed a session, so an
        # in-process deliverer wakes at once instead of at its next poll.
        self.ready_listeners: list[Callable[[], None]] = []
        # Called (from any thread) after a commit queued a run, so an in-process worker
        # starts it at once instead of at its next poll.
        self.run_listeners: list[Callable[[], None]] = []
        self.retries = RetryGate()

    @abstractmethod
    def _transact(self, work: Callable[[Tx], T], *, write: bool = True, durable: bool = True) -> T:
        """Run ``work`` in one transaction, retrying it whole on transient errors.

        ``work`` must be safe to run again: it is, for every operation here, because each
        is a conditional update or an insert-if-absent.

        ``durable=False`` allows a backend to commit without waiting for the disk, for a
        write whose loss in a power cut of the database's machine costs nothing but a retry
        (see :attr:`relaxed_leases`). It is still ordered: a later durable commit makes it
        durable too.
        """

    def _statement(self, query: str, **params: Any) -> list[Row]:
        """Run one statement that commits by itself, and return its rows.

        For the hot paths of background runs (submit, claim, checkpoint, end): PostgreSQL
        runs it without BEGIN and COMMIT, one round trip instead of three. The statement must
        be safe to run again, like everything ``_transact`` runs.
        """
        return self._transact(lambda tx: tx.all(query, **params))

    def now(self) -> float | None:
        """The time to compare with, or None to let the database use its own clock."""
        return self.clock.now() if self.clock.authoritative else None

    def q(self, name: str) -> str:
        return self._queries[name]

    # -- for components that keep tables of their own in this database ------------------

    def add_queries(self, queries: Mapping[str, str]) -> None:
        """Make more named queries of this store's dialect runnable in :meth:`transact`: the
        SQL of a component that keeps its own tables here (the scripted agent's transcripts,
        :mod:`longcall.testing.transcripts`). A name the store uses already is refused."""
        taken = [
            name for name in queries if self._queries.get(name, queries[name]) != queries[name]
        ]
        if taken:
            raise ValueError(f"the store already has a query named {taken[0]!r}")
        self._queries = {**self._queries, **queries}

    def transact(self, work: Callable[[Tx], T], *, write: bool = True) -> T:
        """Run ``work`` in one durable transaction, retried whole on transient errors (so it
        must be safe to run again); its :class:`Tx` runs named queries (:meth:`add_queries`)."""
        return self._transact(work, write=write)

    def _ready(self, tx: Tx) -> None:
        tx.run("notify", channel=NOTIFY_CHANNEL, payload="ready")

    def _after_ready(self) -> None:
        for listener in list(self.ready_listeners):
            listener()

    def _after_bulk_delete(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Called after each batch a prune removes, outside its transaction (see SQLite's)."""

    def _runs_queued(self) -> None:
        for listener in list(self.run_listeners):
            listener()


_STATES = {state.value: state for state in JobState}
_DELIVERIES = {delivery.value: delivery for delivery in Delivery}


def job_from_row(row: Row) -> Job:
    """The one place a job row becomes a :class:`Job` (on every operation: kept lean)."""
    return Job(
        job_id=row["job_id"],
        tool_name=row["tool_name"],
        state=_STATES[row["state"]],
        args=loads(row["args"]) or {},
        result=loads(row["result"]),
        app_name=row["app_name"],
        user_id=row["user_id"],
        session_id=row["session_id"],
        call_id=row["call_id"],
        invocation_id=row["invocation_id"],
        pending_message=row["pending_message"],
        pending_fields=loads(row["pending_fields"]),
        progress=loads(row["progress"]),
        progress_seq=row["progress_seq"],
        notify_seq=row["notify_seq"],
        notified_seq=row["notified_seq"],
        deadline_at=row["deadline_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        delivered_at=row["delivered_at"],
        delivery=_DELIVERIES[row["delivery"]],
        available_at=row["available_at"],
        claim_holder=row["claim_holder"],
        attempts=row["attempts"],
        last_error=row["last_error"],
        attached_at=row["attached_at"],
        claim_fence=row["claim_fence"],
        trace_context=row["trace_context"],
    )
