"""The PostgreSQL store's connection pool: a thread gets back the connection it returned last.

psycopg_pool hands out idle connections in turn; longcall's pool prefers the calling
thread's last connection, so serial statements keep to one warm server process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from longcall.core.clock import SystemClock
from longcall.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, SystemClock(), pool_size=4)
    yield store
    store.close()


def _backends(store: PostgresStore, n: int) -> list[int]:
    """Open ``n`` connections at once, return them all, and give their backend pids."""
    pool = store.pool
    conns = [pool.getconn() for _ in range(n)]
    pids = [conn.info.backend_pid for conn in conns]
    for conn in conns:
        pool.putconn(conn)
    return pids


def _serial(store: PostgresStore, times: int) -> list[int]:
    used = []
    for _ in range(times):
        with store.pool.connection() as conn:
            used.append(conn.info.backend_pid)
    return used


def test_statements_one_after_another_keep_to_one_connection(store: PostgresStore) -> None:
    opened = _backends(store, 3)
    assert len(set(opened)) == 3  # three idle connections to choose from
    # The one this thread returned last, every time: psycopg_pool alone takes them in turn.
    assert _serial(store, 6) == [opened[-1]] * 6


def test_each_thread_keeps_to_its_own_connection(store: PostgresStore) -> None:
    _backends(store, 3)
    go = threading.Barrier(2)
    used: dict[str, list[int]] = {}

    def alternate(name: str) -> None:
        with store.pool.connection() as conn:
            first = conn.info.backend_pid
            go.wait()  # both hold a connection: each returns a different one
        go.wait()  # both returned theirs: each must now find its own, not the latest
        used[name] = [first, *_serial(store, 5)]

    threads = [threading.Thread(target=alternate, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    a, b = used["a"], used["b"]
    assert a == [a[0]] * 6 and b == [b[0]] * 6, (a, b)
    assert a[0] != b[0]
