"""One store interface, two databases: ``sqlite:///path.db`` and ``postgresql://…``."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from longcall.core.clock import Clock
from longcall.errors import ConfigError
from longcall.store._listings import SEARCH_WINDOW
from longcall.store.base import NewJob, OutboxItem, Store
from longcall.store.queries import latest_version

__all__ = ["SEARCH_WINDOW", "NewJob", "OutboxItem", "Store", "latest_version", "open_store"]


def open_store(url: str, clock: Clock) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (``?synchronous=NORMAL`` trades the
    last commits on power loss for speed); ``postgresql://user@host/db`` (``?pool_size=8``).
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from longcall.store.sqlite import SqliteStore

        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise ConfigError(f"no file in SQLite URL {url!r}; use sqlite:///longcall.db")
        options = dict(parse_qsl(parts.query))
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise ConfigError(f"unknown SQLite URL option(s) {sorted(unknown)} in {url!r}")
        return SqliteStore(path, clock, synchronous=options.get("synchronous", "FULL"))
    if parts.scheme in ("postgresql", "postgres"):
        from longcall.store.postgres import PostgresStore

        return PostgresStore(url, clock)
    raise ConfigError(
        f"unsupported database URL {url!r}: use sqlite:///path.db or postgresql://user@host/db"
    )
