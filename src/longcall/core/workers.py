"""A live worker as the store records it (``GET /v1/workers``, ``longcall workers``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker: its id, the workflows it can run, and its times (epoch seconds)."""

    worker_id: str
    workflows: tuple[str, ...]
    started_at: float
    heartbeat_at: float
    expires_at: float
