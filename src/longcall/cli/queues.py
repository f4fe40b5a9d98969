"""``longcall queues``: the named queues, their limits, and what each holds now."""

from __future__ import annotations

import click

from longcall.cli._support import database_option, emit, open_app, output_option


@click.command("queues")
@database_option
@output_option
def queues(database: str, output: str | None) -> None:
    """List the named queues: limits, runs by status (depth: queued) and how long the oldest
    queued run has waited."""
    with open_app(database) as app:
        stats = app.queue_stats()

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("queue", "queued", "running", "waiting", "sleeping", "oldest queued", "limits")
        for s in stats:
            q = s.queue
            limits = [
                f"{name} {value}"
                for name, value in (
                    ("concurrency", q.concurrency),
                    ("per worker", q.worker_concurrency),
                    ("rate", q.rate),
                )
                if value is not None
            ] + (["priority"] if q.priority else [])
            age = s.oldest_queued_age
            t.add_row(
                q.name,
                str(s.depth),
                str(s.counts.get("running", 0)),
                str(s.counts.get("waiting_input", 0)),
                str(s.counts.get("sleeping", 0)),
                "" if age is None else f"{age:.1f}s",
                ", ".join(limits) or "none",
            )
        Console().print(t)

    emit(
        [
            {
                "name": s.queue.name,
                "limits": {
                    "concurrency": s.queue.concurrency,
                    "workerConcurrency": s.queue.worker_concurrency,
                    "rate": s.queue.rate,
                    "priority": s.queue.priority,
                },
                "counts": s.counts,
                "depth": s.depth,
                "oldestQueuedAgeSecs": s.oldest_queued_age,
            }
            for s in stats
        ],
        output,
        table,
    )
