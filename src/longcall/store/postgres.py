"""PostgreSQL backend: several processes and hosts sharing one job table.

Claims use ``FOR UPDATE SKIP LOCKED`` so concurrent deliverers never wait on each other's rows;
commits that make work ready send ``NOTIFY longcall`` so idle workers wake at once (with
polling as the fallback); leases and deadlines are compared on the database's clock.
Connection errors (a restarted server, a dropped connection) are retried with backoff: every
operation is safe to run again.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from longcall.core.backoff import jittered
from longcall.core.clock import Clock
from longcall.core.ids import check_params
from longcall.errors import (
    ConfigError,
    InvalidValue,
    SchemaError,
    StoreError,
    StoreUnavailable,
)
from longcall.store.base import NOTIFY_CHANNEL, Row, Store, Tx
from longcall.store.queries import PLANNED_WITH_VALUES, as_sent

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.rows import dict_row
    from psycopg.types.string import TextLoader
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "PostgreSQL support needs the 'postgres' extra: pip install 'longcall[postgres]'"
    ) from exc

# After the check above: it needs psycopg.
from longcall.store._pg_listen import Listener, Watch

log = logging.getLogger("longcall.store")
T = TypeVar("T")
_MIGRATION_LOCK = 0x6C6F6E67  # "long": an advisory lock only longcall's migrations take


# SQLSTATEs worth another attempt: the transaction lost a race (serialization failure,
# deadlock), the server is going away or coming back (admin shutdown, crash shutdown,
# cannot connect now), it ended a transaction its client left idle (25P03, after
# IDLE_IN_TRANSACTION_TIMEOUT), or it has no connection slot free yet. Class 08
# (connection exceptions) as a whole is added in transient().
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03", "53300", "25P03"})
# Classes whose errors are about the values sent: the same values fail the same way again.
DATA_CLASSES = ("22", "23", "54")


def transient(exc: BaseException) -> bool:
    """Whether the error can pass by itself, so the operation is worth running again."""
    if isinstance(exc, PoolTimeout):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        # No answer from the server at all: a lost connection or one that cannot be made.
        # (A NUL refused by psycopg's own adapter is a DataError, not an OperationalError.)
        return isinstance(exc, psycopg.OperationalError)
    return sqlstate in TRANSIENT_SQLSTATES or sqlstate.startswith("08")


def refused(exc: BaseException) -> Exception:
    """The domain error for a PostgreSQL error that is not worth retrying."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, psycopg.DataError) or sqlstate.startswith(DATA_CLASSES):
        diag = getattr(exc, "diag", None)
        column = getattr(diag, "column_name", None) or getattr(diag, "constraint_name", None)
        message = " ".join(str(exc).split())
        return InvalidValue(column or "a value", f"was refused by PostgreSQL: {message}")
    return StoreError(f"PostgreSQL error: {exc}")


def _execute(
    conn: psycopg.Connection[dict[str, Any]],
    cur: psycopg.Cursor[dict[str, Any]],
    sql: str,
    query: str,
    params: dict[str, Any],
) -> psycopg.Cursor[dict[str, Any]]:
    """Execute the named query on ``cur`` (parameters checked first, see
    :func:`~longcall.core.ids.check_params`); a listing (:data:`PLANNED_WITH_VALUES`) instead
    goes with its values written in, on a cursor of its own, so that it is planned for them
    and never prepared: its best plan depends on which of its filters are given."""
    check_params(params)
    if query in PLANNED_WITH_VALUES:
        cur = psycopg.ClientCursor(conn, row_factory=dict_row)
        cur.execute(as_sent(sql, params), params, prepare=False)
        return cur
    cur.execute(as_sent(sql, params), params)
    return cur


class _Tx:
    __slots__ = ("_conn", "_cur", "_queries")

    def __init__(
        self,
        conn: psycopg.Connection[dict[str, Any]],
        cur: psycopg.Cursor[dict[str, Any]],
        queries: dict[str, str],
    ) -> None:
        self._conn = conn
        self._cur = cur
        self._queries = queries

    def one(self, query: str, **params: Any) -> Row | None:
        cur = _execute(self._conn, self._cur, self._queries[query], query, params)
        return cur.fetchone() if cur.description else None

    def all(self, query: str, **params: Any) -> list[Row]:
        cur = _execute(self._conn, self._cur, self._queries[query], query, params)
        return list(cur.fetchall())

    def run(self, query: str, **params: Any) -> int:
        return _execute(self._conn, self._cur, self._queries[query], query, params).rowcount


class _ReusingPool(ConnectionPool[psycopg.Connection[dict[str, Any]]]):
    """psycopg_pool's pool, handing a thread the connection it returned last if that one is
    idle, else the one returned last by anyone; psycopg_pool takes the one returned first.
    A thread's statements, one after another, then keep to one connection and its server
    process, whose caches are warm: a serial submit costs about a quarter less CPU, client
    and server together, than on connections taken in turn, and ``bench/runs.py`` submits
    about 20% faster. Nothing is pinned: every connection goes back to the pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._returned = threading.local()  # .conn: a weak reference to this thread's last
        super().__init__(*args, **kwargs)

    def putconn(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self._returned.conn = weakref.ref(conn)
        super().putconn(conn)

    def _get_ready_connection(
        self, timeout: float | None
    ) -> psycopg.Connection[dict[str, Any]] | None:
        # Called under the pool's lock. Idle connections wait oldest-returned first and the
        # pool takes from the front: bring the preferred one there. The rest keep their
        # order, so a pool that shrinks still closes the one idle longest.
        idle = self._pool
        if idle:
            ref = getattr(self._returned, "conn", None)
            mine = ref() if ref is not None else None
            if mine is not None and mine in idle:
                idle.remove(mine)
                idle.appendleft(mine)
            else:
                idle.rotate(1)
        return super()._get_ready_connection(timeout)


# Statements are prepared on their first execution, not psycopg's 5th (see plan_once).
PREPARE_THRESHOLD = 0


def plan_once(conn: psycopg.Connection[Any]) -> None:
    """Have PostgreSQL plan each prepared statement once on this connection: a generic plan
    from the first execution on, instead of 5 custom plans before it settles.

    A run claim takes about half a millisecond to plan. Each connection counts each text and
    set of parameter types apart, and PostgreSQL's default planned every one about 11 times
    (5 before psycopg prepared it, 5 custom plans, then the generic one); a worker's claims
    of a few runs at once, rarer, were planned nearly every time. In 2,000 runs on 4 workers
    (``bench/runs.py``) that was about 500 plans; now under 100, and the database spends
    about a fifth less CPU time a run.
    The listings, whose plans do depend on their values, go with them written in
    (:data:`~longcall.store.queries.PLANNED_WITH_VALUES`)."""
    conn.execute("SET plan_cache_mode = force_generic_plan", prepare=False)


# How long the server lets one of longcall's transactions wait for the client's next
# statement before it rolls the transaction back and ends the session. A host cut off from
# the database in the middle of a transaction leaves it open on the server, with its row
# locks, until the server's TCP gives up on the connection (hours with the default
# keepalives); meanwhile every other host's claim of those sessions, and its whole claim
# transaction, waits on them. longcall sends a transaction's statements back to back, so a
# live one idles for milliseconds; one ended by this is retried like a lost connection.
IDLE_IN_TRANSACTION_TIMEOUT = "10s"


def _configure(conn: psycopg.Connection[Any]) -> None:
    # jsonb comes back as its text, so rows map the same way as SQLite's.
    conn.adapters.register_loader("jsonb", TextLoader)
    conn.adapters.register_loader("json", TextLoader)
    plan_once(conn)
    # A setting of this session only (never ALTER SYSTEM): others sharing the server keep theirs.
    conn.execute(
        f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_TIMEOUT}'",
        prepare=False,
    )


def _first_connection(conninfo: str, timeout: float) -> None:
    """Connect once before the pool does, so that a server which cannot be used says why at
    once: the pool would retry in the background and answer only "no connection after 5 s",
    with PostgreSQL's reason (no such database, an unknown role, a bad password, a refused
    connection) left in a log line. Later failures are retried as before."""
    try:
        psycopg.connect(conninfo, connect_timeout=max(1, int(timeout))).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())  # libpq's message spans lines
        raise StoreUnavailable(f"cannot connect to PostgreSQL: {reason}") from exc


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Separate longcall's own settings (``pool_size``) from the libpq connection URL."""
    parts = urlsplit(url)
    ours, theirs = {}, []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("pool_size",):
            ours[key] = value
        else:
            theirs.append((key, value))
    scheme = "postgresql" if parts.scheme in ("postgres", "postgresql") else parts.scheme
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(theirs), "")), ours


class PostgresStore(Store):
    """The store on PostgreSQL through a psycopg connection pool."""

    dialect = "postgres"
    merges_checkpoints = True  # claim_runs, ending a run, writes its last checkpoint too

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        pool_size: int | None = None,
        retry_for: float = 60.0,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(clock)
        self.conninfo, settings = split_url(url)
        try:
            size = pool_size or int(settings.get("pool_size", "8"))
        except ValueError as exc:
            raise ConfigError(
                f"pool_size must be a whole number: {settings['pool_size']!r}"
            ) from exc
        if size < 1:
            raise ConfigError("pool_size must be at least 1")
        self._retry_for = retry_for
        _first_connection(self.conninfo, connect_timeout)
        self.pool = _ReusingPool(
            self.conninfo,
            min_size=1,
            max_size=size,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "prepare_threshold": PREPARE_THRESHOLD,
                "connect_timeout": max(1, int(connect_timeout)),
            },
            configure=_configure,
            timeout=connect_timeout,
            open=True,
            name="longcall",
        )
        # A store still open when the interpreter exits (an App made at module level and
        # never closed) closes its pool at exit, while the pool's threads can still stop:
        # left to the pool's __del__ during finalization, Python 3.13 waits 5 s for each
        # thread, which can no longer run, and a process told to stop overstays its time.
        self._close_pool = weakref.finalize(self, self.pool.close)

    def _transact(self, work: Callable[[Tx], T], *, write: bool = True, durable: bool = True) -> T:
        # Every commit waits for the WAL flush (``durable`` is ignored): a lost lease commit
        # would have been acted on by holders that outlive the server's crash.
        def attempt() -> T:
            with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                return work(_Tx(conn, cur, self._queries))

        return self._retrying(attempt)

    def _statement(self, query: str, **params: Any) -> list[Row]:
        # The pool's connections are in autocommit mode: the statement is its own transaction.
        def attempt() -> list[Row]:
            with self.pool.connection() as conn, conn.cursor() as cur:
                ran = _execute(conn, cur, self._queries[query], query, params)
                return list(ran.fetchall())  # every such statement returns rows

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt``, again with backoff while the error is one that can pass (see
        :func:`transient`), for at most ``retry_for`` seconds and never past a shutdown
        (:attr:`retries`). Any other error is raised at once: a value the database refused
        as :class:`~longcall.errors.InvalidValue`, the rest as StoreError."""
        give_up_at = time.monotonic() + self._retry_for
        delay = 0.01
        while True:
            try:
                result = attempt()
            except (psycopg.Error, PoolTimeout) as exc:
                if not transient(exc):
                    error = refused(exc)
                    self.retries.broke(error)
                    raise error from exc
                self.retries.failed(f"PostgreSQL unavailable: {exc}")
                if time.monotonic() > give_up_at:
                    raise StoreUnavailable(f"PostgreSQL unavailable: {exc}") from exc
                log.warning("PostgreSQL error, retrying in %.2fs: %s", delay, exc)
                self.retries.pause(jittered(2 * delay))  # between delay and twice it
                delay = min(delay * 2, 1.0)
            else:
                self.retries.succeeded()
                return result

    def _is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, pg_errors.UniqueViolation)

    def _schema_version(self) -> int | None:
        try:
            with self.pool.connection() as conn, conn.cursor() as cur:
                return _version(cur)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(f"PostgreSQL unavailable: {exc}") from exc

    def _apply(self, script: str, version: int, name: str, *, from_version: int | None) -> bool:
        try:
            with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                if _version(cur) != from_version:
                    return False
                cur.execute(script.encode(), prepare=False)  # many statements: never prepared
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS lc_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                cur.execute(
                    "INSERT INTO lc_migrations (version, name) VALUES (%s, %s)", (version, name)
                )
                return True
        except psycopg.Error as exc:
            raise SchemaError(f"migration {version} ({name}) failed: {exc}") from exc

    def listen(self, channel: str = NOTIFY_CHANNEL) -> Listener:
        """A dedicated connection that waits for ``NOTIFY <channel>``."""
        return Listener(self.conninfo, channel)

    def watch(self, channel: str) -> Watch:
        """A dedicated connection that listens on ``channel`` while it holds the one watch
        that all processes on this database share (see :mod:`longcall.store._pg_listen`)."""
        return Watch(self.conninfo, channel)

    def close(self) -> None:
        self._close_pool()


def _version(cur: psycopg.Cursor[dict[str, Any]]) -> int | None:
    # Read pg_class, not to_regclass(): the latter consults the connection's catalog cache,
    # which inside a transaction that waited for the migration lock can still say "no such
    # table" after another process committed the schema (and this one would apply it again).
    cur.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class WHERE relname = 'lc_migrations' "
        "AND relnamespace = current_schema()::regnamespace) AS present"
    )
    row = cur.fetchone()
    if not row or not row["present"]:
        return None
    cur.execute("SELECT MAX(version) AS v FROM lc_migrations")
    row = cur.fetchone()
    return None if row is None or row["v"] is None else int(row["v"])
