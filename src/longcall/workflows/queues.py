"""Named queues for background runs (:meth:`App.queue`): declared in Python, kept in the store.

A declaration writes the queue's limits to the store, so every worker process (on any host)
enforces the same numbers; when two processes declare one queue differently, the last
declaration wins and a warning names what changed. A run submitted to a queue is claimed by
the queue's claim (:meth:`~longcall.store.Store.claim_queue_runs`), not the default one.
"""

from __future__ import annotations

import logging

from longcall.core.queues import Queue, QueueStats, check_queue_name, parse_rate
from longcall.errors import QueueNotFound
from longcall.runtime import Runtime

log = logging.getLogger("longcall.runs")


class Queues:
    """The queues an app declared, and the checks a submit to one of them makes."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.declared: dict[str, Queue] = {}

    def declare(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        rate: str | None = None,
        priority: bool = False,
    ) -> Queue:
        limit, period = (None, None) if rate is None else parse_rate(rate)
        queue = Queue(name, concurrency, worker_concurrency, limit, period, bool(priority))
        before = self.runtime.store.define_queue(queue)
        if before is not None and before != queue:
            log.warning("queue %r redefined: %r replaces %r", name, queue, before)
        self.declared[name] = queue
        return queue

    def lookup(self, name: str) -> Queue:
        """The queue, declared here or by another process (its limits as stored)."""
        check_queue_name(name)
        found = self.declared.get(name) or self.runtime.store.get_queue(name)
        if found is None:
            raise QueueNotFound(name)
        return found

    def check_submit(self, queue: str | None, priority: int | None, dedupe_id: str | None) -> int:
        """Refuse a submit the queue cannot take (ValueError, QueueNotFound); the priority
        to store."""
        if queue is None:
            if priority or dedupe_id is not None:
                raise ValueError("priority and dedupe_id need a queue (queue=...)")
            return 0
        found = self.lookup(queue)
        if priority is not None and priority != 0:
            if isinstance(priority, bool) or not isinstance(priority, int):
                raise ValueError(f"priority must be an integer, not {priority!r}")
            if not found.priority:
                raise ValueError(
                    f"queue {queue!r} does not take priorities: declare it with priority=True"
                )
            if not -(2**31) <= priority < 2**31:
                raise ValueError("priority must fit in 32 bits")
        if dedupe_id is not None and (not isinstance(dedupe_id, str) or not dedupe_id):
            raise ValueError("dedupe_id must be a non-empty string")
        return priority or 0

    def stats(self) -> list[QueueStats]:
        return self.runtime.store.queue_stats()
