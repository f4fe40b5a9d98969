"""Named queues in the store: their limits, their claim, and what each holds now.

A queue's claim is one transaction per queue: it locks the queue's row (PostgreSQL: ``FOR
UPDATE``; SQLite has one writer), counts the queue's running runs and its recent claims in a
statement after the lock, and claims no more than the limits leave room for. Two workers
claiming from one queue take turns, on any number of hosts, so a limit holds by construction
rather than by timing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Sequence

from longcall.core.queues import Queue, QueueStats
from longcall.store.core import Row, StoreCore, Tx
from longcall.store.runs import Held, registered_param


def queue_from_row(row: Row) -> Queue:
    return Queue(
        name=row["name"],
        concurrency=row["concurrency"],
        worker_concurrency=row["worker_concurrency"],
        rate_limit=row["rate_limit"],
        rate_period=row["rate_period"],
        priority=bool(row["priority"]),
    )


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class QueueOps(StoreCore):
    """Named queues; part of :class:`~longcall.store.Store`."""

    def define_queue(self, queue: Queue) -> Queue | None:
        """Store the queue's limits (the last definition wins); the definition it replaced,
        None when the queue is new."""

        def work(tx: Tx) -> Queue | None:
            before = tx.one("get_queue", name=queue.name)
            tx.run(
                "define_queue",
                name=queue.name,
                concurrency=queue.concurrency,
                worker_concurrency=queue.worker_concurrency,
                rate_limit=queue.rate_limit,
                rate_period=queue.rate_period,
                priority=queue.priority,
                now=self.now(),
            )
            return None if before is None else queue_from_row(before)

        return self._transact(work)

    def get_queue(self, name: str) -> Queue | None:
        row = self._transact(lambda tx: tx.one("get_queue", name=name), write=False)
        return None if row is None else queue_from_row(row)

    def queues(self) -> list[Queue]:
        rows = self._transact(lambda tx: tx.all("queues"), write=False)
        return [queue_from_row(r) for r in rows]

    def claim_queue_runs(
        self,
        holder: str,
        *,
        worker: str,
        limit: int,
        lease: float,
        names: Sequence[str] | None = None,
        registered: Collection[tuple[str, str]] | None = None,
    ) -> list[Held]:
        """Take up to ``limit`` queued runs of the named queues (all declared queues when
        ``names`` is None) for ``holder`` (new to this claim: a worker numbers its claims),
        within each queue's limits; ``worker`` is the
        prefix of every holder of this worker, whose running runs count against
        ``worker_concurrency``; with ``registered``, only runs of those (workflow id, version)
        pairs, as :meth:`claim_runs`. Each queue's claim is its own transaction (see the module)."""
        wanted = sorted({q.name for q in self.queues()} if names is None else set(names))
        claimed: list[Held] = []
        for name in wanted:
            if len(claimed) >= limit:
                break
            room = limit - len(claimed)
            claim = functools.partial(self._claim_queue, name=name, holder=holder,
                                      worker=worker, limit=room, lease=lease,
                                      registered=registered_param(registered))  # fmt: skip
            rows = self._transact(claim)
            claimed.extend(self._held(rows))
        return claimed

    def _held(self, rows: list[Row]) -> list[Held]:
        raise NotImplementedError  # RunOps's, in the Store

    def _claim_queue(
        self,
        tx: Tx,
        *,
        name: str,
        holder: str,
        worker: str,
        limit: int,
        lease: float,
        registered: str | None,
    ) -> list[Row]:
        now = self.now()
        found = tx.one("lock_queue", name=name)
        if found is None:
            return []
        queue = queue_from_row(found)
        return tx.all(
            "claim_queue_runs",
            name=name,
            holder=holder,
            lease=lease,
            limit=limit,
            now=now,
            mine=_like_prefix(worker),
            concurrency=queue.concurrency,
            worker_concurrency=queue.worker_concurrency,
            rate_limit=queue.rate_limit,
            period=queue.rate_period,
            registered=registered,
        )

    def queue_stats(self) -> list[QueueStats]:
        """Every declared queue with its runs not finished, by status, and the age of its
        oldest queued run (on the database's clock)."""

        def work(tx: Tx) -> tuple[list[Row], list[Row], float]:
            clock = tx.one("database_now", now=self.now())
            now = time.time() if clock is None else float(clock["now"])
            return tx.all("queues"), tx.all("queue_depths"), now

        queues, depths, now = self._transact(work, write=False)
        counts: dict[str, dict[str, int]] = {}
        oldest: dict[str, float] = {}
        for row in depths:
            counts.setdefault(row["queue_name"], {})[row["status"]] = int(row["n"])
            if row["status"] == "queued":
                oldest[row["queue_name"]] = float(row["oldest"])
        return [
            QueueStats(
                queue_from_row(q),
                counts.get(q["name"], {}),
                None if q["name"] not in oldest else max(now - oldest[q["name"]], 0.0),
            )
            for q in queues
        ]
