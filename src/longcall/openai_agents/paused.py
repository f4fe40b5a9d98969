"""Paused runs: the SDK's ``RunState`` of each run that waits on long-running calls, and
which calls it waits on, in a small SQLite file (the one the SDK's sessions live in).

A run that the SDK paused on a long-running call's approval is kept here as the SDK
serialises it (``RunState.to_json``), with one row per open call naming the run. Each write
is one transaction, so a run and its open calls always change together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longcall.core.jobs import SessionKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS longcall_paused_runs (
    run_id TEXT PRIMARY KEY,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    paused_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS longcall_open_calls (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES longcall_paused_runs (run_id) ON DELETE CASCADE,
    PRIMARY KEY (app_name, user_id, session_id, call_id)
);
CREATE INDEX IF NOT EXISTS longcall_open_calls_run ON longcall_open_calls (run_id);
"""


@dataclass(frozen=True, slots=True)
class OpenCall:
    """A long-running call a paused run waits on."""

    call_id: str
    tool_name: str
    run_id: str


class PausedRuns:
    """The paused runs and their open calls, in the SQLite file at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with self._connect() as db:
            db.executescript(SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # One short connection per operation: the calls come from the app's threads.
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    def pause(
        self, key: SessionKey, run_id: str, state: dict[str, Any], calls: Sequence[OpenCall]
    ) -> None:
        """Keep ``run_id``'s state with the calls it waits on (replacing what it had)."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM longcall_paused_runs WHERE run_id = ?", (run_id,))
            db.execute(
                "INSERT INTO longcall_paused_runs VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, *_key(key), json.dumps(state), time.time()),
            )
            db.executemany(
                "INSERT INTO longcall_open_calls VALUES (?, ?, ?, ?, ?, ?)",
                [(*_key(key), c.call_id, c.tool_name, run_id) for c in calls],
            )
            db.execute("COMMIT")

    def finish(self, run_id: str) -> None:
        """Forget ``run_id`` and its open calls (it ran to its end). Repeating it is a no-op."""
        with self._connect() as db:
            db.execute("DELETE FROM longcall_paused_runs WHERE run_id = ?", (run_id,))

    def open_calls(self, key: SessionKey, call_ids: Sequence[str]) -> dict[str, OpenCall]:
        """Which of ``call_ids`` a paused run of the session waits on."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT call_id, tool_name, run_id FROM longcall_open_calls"
                " WHERE app_name = ? AND user_id = ? AND session_id = ?",
                _key(key),
            ).fetchall()
        wanted = set(call_ids)
        return {row[0]: OpenCall(*row) for row in rows if row[0] in wanted}

    def state(self, run_id: str) -> dict[str, Any] | None:
        """The serialised ``RunState`` of a paused run, or None."""
        with self._connect() as db:
            row = db.execute(
                "SELECT state FROM longcall_paused_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    async def pause_async(
        self, key: SessionKey, run_id: str, state: dict[str, Any], calls: Sequence[OpenCall]
    ) -> None:
        await asyncio.to_thread(self.pause, key, run_id, state, calls)

    async def finish_async(self, run_id: str) -> None:
        await asyncio.to_thread(self.finish, run_id)

    async def open_calls_async(
        self, key: SessionKey, call_ids: Sequence[str]
    ) -> dict[str, OpenCall]:
        return await asyncio.to_thread(self.open_calls, key, call_ids)

    async def state_async(self, run_id: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.state, run_id)


def _key(key: SessionKey) -> tuple[str, str, str]:
    return key.app_name, key.user_id, key.session_id
