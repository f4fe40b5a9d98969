"""PostgreSQL notifications: a listener per process, or one watch shared by many processes.

``NOTIFY`` wakes every session listening on its channel. For the job deliverer that is right
(each process delivers its own sessions' work). For background runs it is a herd: every
submit would wake every worker process, each would claim, and all but one would find nothing.
So the run workers share a *watch*: only the session holding a per-channel advisory lock
listens, and it hands the lock on when its worker has no room left. Any worker can take it
over (the lock is released when its holder's connection ends, even by SIGKILL), and a new
holder claims once right after it starts listening, for what was queued while nobody was.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import time
from typing import Any

import psycopg

log = logging.getLogger("longcall.store")

# How often a session waiting for the watch tries for it: the longest a handover waits.
# They try on the server, rather than listening for the holder's word on a channel of its
# own: PostgreSQL wakes every session listening in the database for every NOTIFY, whatever
# its channel, and three sessions listening elsewhere made each submit 4-17% slower.
TRY_EVERY = 0.01


class Listener:
    """Blocks until a notification arrives or a timeout passes; reconnects on its own."""

    def __init__(self, conninfo: str, channel: str) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._conn: psycopg.Connection[Any] | None = None
        self._readable: selectors.BaseSelector | None = None
        # A statement ran since the notifications were last read: psycopg keeps the ones
        # that came with its results, which the socket will not show again.
        self._backlog = False

    def _connected(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self.close()
            self._conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5)
            self._readable = selectors.DefaultSelector()
            self._readable.register(self._conn.fileno(), selectors.EVENT_READ)
            self._on_connect(self._conn)
        return self._conn

    def _on_connect(self, conn: psycopg.Connection[Any]) -> None:
        self._execute(f"LISTEN {self._channel}", conn)

    def _execute(
        self, sql: str, conn: psycopg.Connection[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        self._backlog = True
        return (conn or self._connected()).execute(sql)

    def wait(self, timeout: float) -> bool:
        """True when at least one notification on the channel arrived within ``timeout``
        seconds."""
        try:
            return self._channel in self._heard(timeout)
        except psycopg.Error as exc:
            self._lost(exc, timeout)
            return False

    def _heard(self, timeout: float) -> set[str]:
        """The channels notified within ``timeout`` seconds (or before, while a statement
        ran on the connection). The wait is on the socket, here: psycopg's own
        ``notifies(timeout=…)`` spins through about the last millisecond of its timeout,
        a millisecond of CPU a call, which for a holder looking up every 50 ms was 2% of a
        core with nothing to do."""
        conn = self._connected()
        heard: set[str] = set()
        if self._backlog:
            self._backlog = False
            heard = {n.channel for n in conn.notifies(timeout=0)}
        if not heard and self._readable is not None and self._readable.select(timeout):
            heard = {n.channel for n in conn.notifies(timeout=0)}
        return heard

    def _lost(self, exc: psycopg.Error, timeout: float) -> None:
        log.debug("listener lost its connection: %s", exc)
        self.close()
        time.sleep(min(timeout, 1.0))

    def close(self) -> None:
        if self._readable is not None:
            self._readable.close()
            self._readable = None
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


class Watch(Listener):
    """The one listener on ``channel`` among every process sharing the database (schema).

    :meth:`take` waits for the watch; :meth:`wait` then reports notifications as a
    :class:`Listener` does, until :meth:`give_up`. A lost connection loses the watch.
    """

    def __init__(self, conninfo: str, channel: str) -> None:
        super().__init__(conninfo, channel)
        self.held = False
        # The two-key advisory lock: the schema and the channel, so that deployments in two
        # schemas of one database keep a watch each.
        self._key = f"hashtext(current_schema()), hashtext('{channel}')"

    def _on_connect(self, conn: psycopg.Connection[Any]) -> None:
        self.held = False

    def take(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the watch; True once this session listens."""
        if self.held:
            return True
        # One round trip: the server tries for the lock every TRY_EVERY seconds and, once it
        # has it, listens. Not a blocking pg_advisory_lock under lock_timeout: every timeout
        # would log an error on the server, twice a second per waiting worker, and on
        # PostgreSQL 15 a lock timeout firing as a ProcSignalBarrier arrives can leave the
        # barrier unanswered, so a DROP DATABASE anywhere on the server hangs until this
        # session ends (seen: 20 minutes).
        rounds = max(1, round(timeout / TRY_EVERY))
        try:
            cur = self._execute(
                f"DO $take$ BEGIN FOR i IN 1..{rounds} LOOP "
                f"IF pg_try_advisory_lock({self._key}) THEN LISTEN {self._channel}; RETURN; "
                f"END IF; PERFORM pg_sleep({TRY_EVERY}); END LOOP; END $take$; "
                # The session's one advisory lock is the watch.
                "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid = pg_backend_pid())"
            )
            cur.nextset()
            row = cur.fetchone()
        except psycopg.Error as exc:
            self._lost(exc, timeout)
            return False
        self.held = bool(row and row[0])
        return self.held

    def wait(self, timeout: float) -> bool:
        if not self.held:
            time.sleep(timeout)
            return False
        got = super().wait(timeout)
        if self._conn is None:  # the connection went, and the watch with it
            self.held = False
        return got

    def give_up(self) -> None:
        """Stop listening and let another process take the watch."""
        if not self.held:
            return
        self.held = False
        try:
            self._execute(f"UNLISTEN {self._channel}; SELECT pg_advisory_unlock({self._key})")
        except psycopg.Error as exc:  # a closed connection has released the lock already
            log.debug("giving up the watch failed: %s", exc)
            self.close()

    def close(self) -> None:
        self.held = False
        super().close()
