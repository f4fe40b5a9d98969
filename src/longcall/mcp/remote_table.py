"""The remote tasks that local jobs wait on, kept in longcall's own database.

A table of this package's own (``sql/<dialect>.sql``, made on first use) beside the job
table: for each local job, the remote server's name (its address and credentials stay in
the application's configuration, never in the database), the remote task id, when to poll
next and how often it was polled and failed to be reached. A poller claims due rows by
pushing their ``next_poll_at`` past a lease in one statement (with ``SKIP LOCKED`` on
PostgreSQL), so pollers in several processes never poll the same task at once, and a
poller that dies mid-poll leaves its rows to the next one when the lease runs out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from longcall.store import Store
from longcall.store.core import Tx
from longcall.store.queries import parse_queries


@dataclass(frozen=True, slots=True)
class ClaimedTask:
    """A row a poller claimed: the local job, where its task runs, and its history."""

    job_id: str
    server: str
    task_id: str
    polls: int
    failures: int
    answer: dict[str, Any] | None  # a result the server gave at once, without a task
    status_message: str | None = None  # the task's status message when last polled


def _queries(dialect: str) -> dict[str, str]:
    sql = resources.files("longcall.mcp") / "sql" / f"{dialect}.sql"
    return parse_queries(sql.read_text("utf-8"))


class RemoteTaskTable:
    """``lc_mcp_remote_tasks`` in ``store``'s database; the table is made here."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.add_queries(_queries(store.dialect))
        store.transact(self._create)

    @staticmethod
    def _create(tx: Tx) -> None:
        tx.run("mcpc_lock")
        tx.run("mcpc_create")

    def add(
        self,
        job_id: str,
        server: str,
        task_id: str,
        *,
        delay: float,
        status_message: str | None = None,
        answer: dict[str, Any] | None = None,
    ) -> None:
        """Remember the task ``job_id`` waits on; a second add for the job changes nothing."""
        params = {
            "job_id": job_id,
            "server": server,
            "task_id": task_id,
            "delay": delay,
            "status_message": status_message,
            "answer": None if answer is None else json.dumps(answer),
            "now": self.store.now(),
        }
        self.store.transact(lambda tx: tx.run("mcpc_insert", **params))

    def claim(self, *, limit: int, lease: float) -> list[ClaimedTask]:
        """Up to ``limit`` rows due now, each kept from other pollers for ``lease`` seconds."""
        now = self.store.now()
        rows = self.store.transact(
            lambda tx: tx.all("mcpc_claim", now=now, lease=lease, limit=limit)
        )
        return [
            ClaimedTask(
                str(r["job_id"]),
                str(r["server"]),
                str(r["task_id"]),
                int(r["polls"]),
                int(r["failures"]),
                None if r["answer"] is None else json.loads(r["answer"]),
                r["status_message"],
            )
            for r in rows
        ]

    def reschedule(
        self,
        job_id: str,
        *,
        delay: float,
        polls: int,
        failures: int,
        status_message: str | None = None,
    ) -> None:
        params = {
            "job_id": job_id,
            "delay": delay,
            "polls": polls,
            "failures": failures,
            "status_message": status_message,
            "now": self.store.now(),
        }
        self.store.transact(lambda tx: tx.run("mcpc_reschedule", **params))

    def delete(self, job_id: str) -> None:
        self.store.transact(lambda tx: tx.run("mcpc_delete", job_id=job_id))

    def get(self, job_id: str) -> dict[str, Any] | None:
        """The row as stored (for inspection and tests), or None once it is gone."""
        row = self.store.transact(lambda tx: tx.one("mcpc_get", job_id=job_id), write=False)
        return None if row is None else dict(row)
