"""The PostgreSQL store's connection pool hands a thread the connection it returned last."""

from __future__ import annotations

import pytest

from longcall.clock import SystemClock

pytestmark = pytest.mark.postgres


def test_statements_one_after_another_keep_to_one_connection(pg_url: str) -> None:
    from longcall.store.postgres import PostgresStore

    store = PostgresStore(pg_url, SystemClock(), pool_size=4)
    try:
        with (
            store.pool.connection() as first,
            store.pool.connection() as second,
            store.pool.connection() as third,
        ):
            opened = [conn.info.backend_pid for conn in (first, second, third)]
        assert len(set(opened)) == 3  # three idle connections to choose from now

        used = []
        for _ in range(6):
            with store.pool.connection() as conn:
                used.append(conn.info.backend_pid)
        # The one returned last (the first one opened, released last by the nested block),
        # every time: psycopg_pool alone would take the three in turn.
        assert used == [opened[0]] * 6
    finally:
        store.close()
