"""PostgreSQL plans that must not depend on statistics: a new database, or one whose
autovacuum is off or behind, has none, and the planner then goes by its defaults."""

from __future__ import annotations

import psycopg
import pytest

from longcall import App

pytestmark = pytest.mark.postgres


def plan(url: str, sql: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(f"EXPLAIN {sql}").fetchall()
    return "\n".join(str(row[0]) for row in rows)


def test_a_running_run_found_by_id_is_found_by_its_primary_key(pg_url: str) -> None:
    """Checkpoints and ends find their run by id while it runs: on a database without
    statistics they use the primary key, not the leased runs' index (whose whole length,
    dead entries included, the planner once walked for every checkpoint)."""
    App(pg_url).close()  # the schema
    held = (
        "SELECT cancel_requested FROM lc_runs WHERE run_id = 'r' AND holder = 'h' "
        "AND status = 'running' FOR SHARE"
    )
    ended = (
        "UPDATE lc_runs SET status = 'completed', holder = NULL, lease_expires_at = NULL "
        "WHERE run_id = 'r' AND holder = 'h' AND status = 'running'"
    )
    for sql in (held, ended):
        got = plan(pg_url, sql)
        assert "lc_runs_pkey" in got and "lc_runs_leased" not in got, got


def test_the_takeover_scan_and_the_cancel_check_use_the_leased_runs_index(pg_url: str) -> None:
    """Runs whose lease ran out, and this worker's runs asked to stop, are looked up in the
    leased runs' index, not by reading the whole table."""
    App(pg_url).close()
    takeover = (
        "SELECT run_id FROM lc_runs WHERE status = 'running' AND lease_expires_at <= 1.0 "
        "ORDER BY lease_expires_at LIMIT 4"
    )
    cancelling = (
        "SELECT run_id FROM lc_runs WHERE holder LIKE 'w/%' AND status = 'running' "
        "AND cancel_requested AND lease_expires_at IS NOT NULL"
    )
    for sql in (takeover, cancelling):
        got = plan(pg_url, sql)
        assert "lc_runs_leased" in got, got
