"""SQLite backend: the embedded default, one file shared by any number of local processes.

WAL lets readers run beside the one writer; every write transaction starts with
``BEGIN IMMEDIATE`` so a transaction that reads and then writes takes the write lock first
(a deferred one can fail with "database is locked" in ways the busy timeout does not absorb).
``synchronous=FULL`` by default: an acknowledged completion survives a power cut. ``NORMAL``
is faster and still safe against a process crash, but may lose the last commits on power loss.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from longcall.core.backoff import jittered
from longcall.core.clock import Clock
from longcall.core.ids import check_params
from longcall.errors import ConfigError, InvalidValue, SchemaError, StoreError, StoreUnavailable
from longcall.store.base import Row, Store, Tx
from longcall.store.queries import as_sent

T = TypeVar("T")

SYNCHRONOUS_MODES = ("FULL", "NORMAL")


class _Tx:
    __slots__ = ("_conn", "_queries")

    def __init__(self, conn: sqlite3.Connection, queries: dict[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def one(self, query: str, **params: Any) -> Row | None:
        check_params(params)
        # fetchall: a RETURNING statement must be read to its end before the commit.
        rows = self._conn.execute(as_sent(self._queries[query], params), params).fetchall()
        return cast(Row, rows[0]) if rows else None

    def all(self, query: str, **params: Any) -> list[Row]:
        # A query may be several statements here (SQLite has no UPDATE inside WITH): they run
        # in order, and the rows of all of them come back.
        check_params(params)
        rows: list[Row] = []
        for statement in _statements(as_sent(self._queries[query], params)):
            rows += self._conn.execute(statement, params).fetchall()
        return rows

    def run(self, query: str, **params: Any) -> int:
        check_params(params)
        return self._conn.execute(as_sent(self._queries[query], params), params).rowcount


def split_statements(script: str) -> list[str]:
    """Split a SQL script into complete statements (``sqlite3.complete_statement`` decides)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in current.splitlines()
    ):
        raise ValueError(f"incomplete SQL statement at the end of a script: {current[:80]!r}")
    return statements


@functools.cache
def _statements(query: str) -> list[str]:
    return split_statements(query + ";")


# Writes committed together at most: enough to share one fsync among the writers of a busy
# process, few enough that one group does not hold the database for long.
GROUP_LIMIT = 64


class _Pending:
    """A write transaction waiting for its group's commit."""

    __slots__ = ("durable", "error", "event", "finished", "result", "work")

    def __init__(self, work: Callable[[Tx], Any], durable: bool) -> None:
        self.work = work
        self.durable = durable
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.event: threading.Event | None = None  # made only for a write that waits


class _Slot:
    """A thread's connection and the ``synchronous`` mode it is set to.

    The thread's ``threading.local`` holds the only reference: when the thread ends, the slot
    goes and its finalizer closes the connection, so a process that starts threads one after
    another (a heartbeat per lease, an executor per event loop) does not keep a connection and
    its file descriptors open for every thread it ever had.
    """

    __slots__ = ("__weakref__", "conn", "synchronous")

    def __init__(self, conn: sqlite3.Connection, synchronous: str) -> None:
        self.conn = conn
        self.synchronous = synchronous


def _close_orphan(conn: sqlite3.Connection, opened: set[sqlite3.Connection]) -> None:
    """Close the connection of a thread that ended; the store no longer tracks it."""
    # No lock: the finalizer may run on a thread that holds the store's lock at that moment,
    # and discard is one atomic step.
    opened.discard(conn)
    conn.close()


def _wrapped(exc: Exception) -> Exception:
    """A work's error as its caller would have seen it from a transaction of its own."""
    if isinstance(exc, sqlite3.DatabaseError):
        wrapped = _refused(exc)
        wrapped.__cause__ = exc
        return wrapped
    return exc


def _refused(exc: sqlite3.DatabaseError) -> Exception:
    """The domain error for a SQLite error that is not worth retrying: a value SQLite
    refused (too big, the wrong kind) as InvalidValue, anything else as StoreError."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if isinstance(exc, sqlite3.DataError) or code == sqlite3.SQLITE_TOOBIG:
        return InvalidValue("a value", f"was refused by SQLite: {exc}")
    return StoreError(f"SQLite error: {exc}")


class SqliteStore(Store):
    """The store on one SQLite file; a connection per thread."""

    dialect = "sqlite"
    relaxed_leases = True  # every holder runs on this machine (WAL needs shared memory)

    def __init__(
        self,
        path: str | Path,
        clock: Clock,
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 5.0,
        retry_for: float = 30.0,
    ) -> None:
        super().__init__(clock)
        mode = synchronous.upper()
        if mode not in SYNCHRONOUS_MODES:
            raise ConfigError(
                f"synchronous must be one of {SYNCHRONOUS_MODES}, not {synchronous!r}"
            )
        self.path = str(path)
        if self.path == ":memory:":
            raise ConfigError("an in-memory SQLite store cannot be shared; use a file path")
        self.synchronous = mode
        self._busy_ms = int(busy_timeout * 1000)
        self._retry_for = retry_for
        self._local = threading.local()
        self._opened: set[sqlite3.Connection] = set()  # each live thread's, for close()
        self._lock = threading.Lock()
        # SQLite has one writer at a time. Threads of this process queue here instead of in
        # the busy handler, whose sleeps (1 ms and up) would cost more than the writes.
        self._write_lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._queue_lock = threading.Lock()
        self._leading = False
        self._closed = False

    def now(self) -> float:
        # One host, one clock: SQLite always compares with the time we pass.
        return self.clock.now()

    def _conn(self) -> sqlite3.Connection:
        return self._slot().conn

    def _slot(self) -> _Slot:
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is not None:
            return slot
        if self._closed:
            raise StoreError("the store is closed")
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnavailable(_cannot_open(self.path, exc)) from exc
        try:
            self._configure(conn)
        except BaseException:
            conn.close()  # nobody else will
            raise
        slot = _Slot(conn, self.synchronous)
        with self._lock:
            self._opened.add(conn)
        weakref.finalize(slot, _close_orphan, conn, self._opened).atexit = False
        self._local.slot = slot
        return slot

    def _configure(self, conn: sqlite3.Connection) -> None:
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            self._set_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StoreUnavailable(_cannot_open(self.path, exc)) from exc

    def _after_bulk_delete(self) -> None:
        # A prune fills the write-ahead log fast, and SQLite checkpoints it in whichever
        # commit takes it past its threshold: a completion's, which then waits for the copy
        # and its fsync. Checkpointing here, in the pruner's thread, keeps that cost on the
        # pruner. PASSIVE: it never waits for a reader or a writer.
        try:
            self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise StoreError(f"SQLite error: {exc}") from exc

    def _set_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers "locked"
        # at once, without the busy handler, while another connection does the same.
        give_up_at = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreUnavailable(_cannot_open(self.path, exc)) from exc
                if time.monotonic() > give_up_at:
                    raise StoreUnavailable(f"SQLite stayed locked: {exc}") from exc
                time.sleep(jittered(0.01))

    def _transact(self, work: Callable[[Tx], T], *, write: bool = True, durable: bool = True) -> T:
        if not write:
            conn = self._conn()
            try:
                return work(_Tx(conn, self._queries))
            except sqlite3.DatabaseError as exc:
                raise _refused(exc) from exc
        mine = _Pending(work, durable)
        with self._queue_lock:
            alone = not self._leading
            self._leading = True
            if not alone:
                mine.event = threading.Event()
                self._queue.append(mine)
        if alone:  # nobody else writing: no group to join
            try:
                self._commit_group([mine])
            finally:
                self._pass_lead()
        else:
            assert mine.event is not None
            mine.event.wait()
            if not mine.finished:  # handed the lead: commit the group this write is in
                self._lead(mine)
        if mine.error is not None:
            raise mine.error
        return cast(T, mine.result)

    # -- group commit ------------------------------------------------------------------
    #
    # Writers of this process queue their transactions; one of them, the leader, runs
    # everything queued in one SQLite transaction, each in a savepoint of its own, and
    # commits once: one fsync for many writes. Each writer still returns only after the
    # commit, and a writer whose work raises has only its savepoint rolled back.

    def _lead(self, mine: _Pending) -> None:
        while not mine.finished:
            with self._queue_lock:
                batch = self._queue[:GROUP_LIMIT]
                del self._queue[:GROUP_LIMIT]
            self._commit_group(batch)
        self._pass_lead()

    def _pass_lead(self) -> None:
        with self._queue_lock:
            if self._queue:  # hand the lead on, so no writer serves the others forever
                event = self._queue[0].event
                assert event is not None
                event.set()
            else:
                self._leading = False

    def _commit_group(self, batch: list[_Pending]) -> None:
        conn = self._conn()
        tx = _Tx(conn, self._queries)
        give_up_at = time.monotonic() + self._retry_for
        delay = 0.005
        try:
            while True:
                try:
                    with self._write_lock:
                        self._run_group(conn, tx, batch)
                    self.retries.succeeded()
                    break
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        error = _refused(exc)
                        self.retries.broke(error)
                        raise error from exc
                    self.retries.failed(f"SQLite stayed locked: {exc}")
                    if time.monotonic() > give_up_at:
                        raise StoreUnavailable(f"SQLite stayed locked: {exc}") from exc
                    self.retries.pause(jittered(2 * delay))  # between delay and twice it
                    delay = min(delay * 2, 0.2)
                except sqlite3.DatabaseError as exc:
                    error = _refused(exc)
                    self.retries.broke(error)
                    raise error from exc
        except BaseException as exc:
            for item in batch:
                item.result, item.error = None, exc
        finally:
            for item in batch:
                item.finished = True
                if item.event is not None:
                    item.event.set()

    def _run_group(self, conn: sqlite3.Connection, tx: _Tx, batch: list[_Pending]) -> None:
        self._set_synchronous(conn, durable=any(item.durable for item in batch))
        conn.execute("BEGIN IMMEDIATE")
        try:
            if len(batch) == 1:
                item = batch[0]
                item.result, item.error = item.work(tx), None
            else:
                for item in batch:
                    conn.execute("SAVEPOINT lc_write")
                    try:
                        item.result, item.error = item.work(tx), None
                    except sqlite3.OperationalError as exc:
                        if _is_busy(exc):
                            raise  # the whole group waits and runs again
                        item.result, item.error = None, _wrapped(exc)
                        conn.execute("ROLLBACK TO lc_write")
                    except Exception as exc:
                        item.result, item.error = None, _wrapped(exc)
                        conn.execute("ROLLBACK TO lc_write")
                    conn.execute("RELEASE lc_write")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _set_synchronous(self, conn: sqlite3.Connection, *, durable: bool) -> None:
        """Commit the next transaction with the store's fsync (FULL) or without one.

        In WAL mode NORMAL still survives a process crash; a power cut may lose the commit,
        but only together with everything after it: the next FULL commit syncs the log up
        to itself. SQLite refuses the change inside a transaction, so it is made before.
        """
        wanted = self.synchronous if durable else "NORMAL"
        slot = self._slot()
        if slot.synchronous != wanted:
            conn.execute(f"PRAGMA synchronous = {wanted}")
            slot.synchronous = wanted

    def _is_unique_violation(self, exc: BaseException) -> bool:
        # Extended result codes (Python 3.11+): no matching of SQLite's message text.
        return isinstance(exc, sqlite3.IntegrityError) and exc.sqlite_errorcode in (
            sqlite3.SQLITE_CONSTRAINT_UNIQUE,
            sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY,
        )

    def _schema_version(self) -> int | None:
        conn = self._conn()
        try:
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lc_migrations'"
            ).fetchone()
            if has_table is None:
                return None
            row = conn.execute("SELECT MAX(version) FROM lc_migrations").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the schema version of {self.path!r}: {exc}") from exc
        return None if row[0] is None else int(row[0])

    def _apply(self, script: str, version: int, name: str, *, from_version: int | None) -> bool:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._schema_version() != from_version:
                conn.execute("ROLLBACK")
                return False  # another process got there first
            for statement in split_statements(script):
                conn.execute(statement)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS lc_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            conn.execute(
                "INSERT INTO lc_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, time.time()),
            )
            conn.execute("COMMIT")
            return True
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise SchemaError(f"migration {version} ({name}) failed: {exc}") from exc

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conns = list(self._opened)
            self._opened.clear()
        for conn in conns:
            # A connection may be closed already, its thread having ended meanwhile.
            with contextlib.suppress(sqlite3.ProgrammingError):
                conn.close()


def _is_busy(exc: sqlite3.Error) -> bool:
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _cannot_open(path: str, exc: sqlite3.Error) -> str:
    """Why the file cannot be used, with the fix when it is a matter of permissions."""
    reason = f"cannot open SQLite database {path!r}: {exc}"
    if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
        reason += (
            " (the file or its folder is read-only or missing: longcall writes the file and"
            " creates its -wal and -shm files beside it)"
        )
    return reason
