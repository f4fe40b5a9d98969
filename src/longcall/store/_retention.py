"""Removing finished work older than a cutoff, one small batch per transaction."""

from __future__ import annotations

from longcall.store.core import StoreCore

# Each kind: the statement that removes a batch, the one that counts what it would remove.
KINDS = {
    "jobs": ("prune_jobs", "count_prunable_jobs"),
    "runs": ("prune_runs", "count_prunable_runs"),
    "inbox": ("prune_inbox", "count_prunable_inbox"),
    "early_results": ("prune_early_results", "count_prunable_early_results"),
}


class RetentionOps(StoreCore):
    """Batches of finished records removed; part of :class:`~longcall.store.Store`."""

    def prune(self, kind: str, age: float, *, limit: int) -> int:
        """Remove at most ``limit`` records of ``kind`` (see :data:`KINDS`) finished more than
        ``age`` seconds ago (on the store's clock) that nothing can change any more, oldest
        first, in one transaction; how many went. Jobs and runs take their logs, steps and
        interrupts with them."""
        statement, now = KINDS[kind][0], self.now()
        removed = self._transact(lambda tx: tx.run(statement, now=now, age=age, limit=limit))
        if removed:
            self._after_bulk_delete()
        return removed

    def count_prunable(self, kind: str, age: float) -> int:
        """How many records of ``kind`` :meth:`prune` would remove, all batches together (a
        count over the table: for ``longcall prune --dry-run``, not the hot path)."""
        statement, now = KINDS[kind][1], self.now()
        row = self._transact(lambda tx: tx.one(statement, now=now, age=age), write=False)
        return 0 if row is None else int(row["n"])
