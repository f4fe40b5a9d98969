"""The workers alive, and the workflows each can run: what tells a queued run that no worker
will take from one that waits its turn.

A worker beats as it sweeps (every few seconds, not once per run): its row says which
workflows it has registered and, on the database's clock, until when it counts as alive. A
worker that stops deletes its row; one that dies leaves it to run out, and the next worker to
start deletes rows long out of date.
"""

from __future__ import annotations

from collections.abc import Iterable

from longcall.core.workers import WorkerInfo
from longcall.store.core import StoreCore, Tx, dumps, loads

KEEP_DEAD = 86400.0  # seconds a dead worker's row stays before a starting worker deletes it


class WorkerOps(StoreCore):
    """The workers' heartbeats; part of :class:`~longcall.store.Store`."""

    def beat_worker(
        self, worker_id: str, workflows: Iterable[str], *, ttl: float, first: bool = False
    ) -> None:
        """Record that the worker is alive for ``ttl`` more seconds and can run ``workflows``.

        One statement; a repeated call moves the expiry on and replaces the workflows. The
        ``first`` beat of a worker also deletes the rows of workers dead for a day.
        """
        now = self.now()
        names = dumps(sorted(set(workflows)))

        def work(tx: Tx) -> None:
            if first:
                tx.run("prune_workers", now=now, keep=KEEP_DEAD)
            tx.run("beat_worker", worker_id=worker_id, workflows=names, ttl=ttl, now=now)

        self._transact(work)

    def forget_worker(self, worker_id: str) -> None:
        """Delete the worker's row (it stops); nothing happens for an unknown id."""
        self._transact(lambda tx: tx.run("forget_worker", worker_id=worker_id))

    def live_workers(self) -> list[WorkerInfo]:
        """The workers whose last beat has not expired, oldest first."""
        now = self.now()
        rows = self._transact(lambda tx: tx.all("live_workers", now=now), write=False)
        return [
            WorkerInfo(
                r["worker_id"],
                tuple(loads(r["workflows"]) or ()),
                r["started_at"],
                r["heartbeat_at"],
                r["expires_at"],
            )
            for r in rows
        ]
