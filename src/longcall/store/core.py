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

    def _now(self) -> float | None:
        """The time to compare with, or None to let the database use its own clock."""
        return self.clock.now() if self.clock.authoritative else None

    def q(self, name: str) -> str:
        return self._queries[name]

    def _ready(self, tx: Tx) -> None:
        tx.run("notify", channel=NOTIFY_CHANNEL, payload="ready")

    def _after_ready(self) -> None:
        for listener in list(self.ready_listeners):
            listener()

    def _runs_queued(self) -> None:
        for listener in list(self.run_listeners):
            listener()
