"""Cron schedules in the store (being built)."""

from __future__ import annotations

from longcall.store.core import StoreCore


class CronOps(StoreCore):
    """Cron schedules and their claimed occurrences; part of :class:`~longcall.store.Store`."""
