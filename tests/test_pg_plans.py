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


def test_claims_keep_one_plan_once_the_tables_have_statistics(pg_url: str) -> None:
    """Run claims (and run ends claiming the next) are planned once per connection, not at
    every execution: with a LIMIT parameter, PostgreSQL planned each claim afresh as soon
    as the table had statistics (about 0.4 ms a claim). And once means once: prepared on
    the first execution, a generic plan from then on, not 5 custom plans first."""
    app = App(pg_url)

    @app.workflow("one")
    def one(n: int) -> int:
        return n

    try:
        for n in range(200):
            app.submit_run("one", n)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE lc_runs")
        for n in range(30):
            assert len(app.store.claim_runs(f"w/{n}", limit=1, lease=30.0)) == 1
        # This thread's statements keep to one pooled connection: its prepared statements.
        with app.store.pool.connection() as conn:
            rows = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH ended AS%%'"
            ).fetchall()
    finally:
        app.close()
    assert len(rows) == 1, rows
    assert (rows[0]["generic_plans"], rows[0]["custom_plans"]) == (30, 0)


def test_listings_are_planned_for_their_filters_and_never_prepared(pg_url: str) -> None:
    """A listing's best plan depends on which of its optional filters are given: it goes
    with its values written in, so each one is planned for them, and it holds no prepared
    statement (whose one plan would serve every filter alike)."""
    app = App(pg_url)

    @app.workflow("one")
    def one(n: int) -> int:
        return n

    @app.workflow("two")
    def two(n: int) -> int:
        return n

    try:
        for n in range(6):
            app.submit_run("one" if n % 2 else "two", n)
        for _ in range(6):  # past psycopg's default threshold for preparing
            assert len(app.store.list_runs(limit=50)) == 6
            assert {r.workflow_id for r in app.store.list_runs(workflow_id="one")} == {"one"}
            assert len(app.store.list_runs(workflow_id="two", limit=2)) == 2
        with app.store.pool.connection() as conn:
            prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    finally:
        app.close()
    statements = [r["statement"] for r in prepared]
    assert any("INSERT INTO lc_runs" in text for text in statements), statements
    assert not any("ORDER BY created_at DESC, run_id DESC" in text for text in statements)


def test_a_users_listing_by_state_reads_only_that_users_jobs_in_that_state(pg_url: str) -> None:
    """Every request with a user's token names the user; with ``?state=started`` PostgreSQL
    once combined the user's index with the partial index of every started job (10,000 of
    them at a million jobs, 1.7 ms and growing with the table). Schema 16's index answers it
    by itself: the plan reads only that user's started jobs (it may sort those few)."""
    App(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO lc_jobs (job_id, tool_name, user_id, state, created_at, updated_at) "
            "SELECT 'j' || n, 'tool', 'user-' || (n % 200), "
            "CASE WHEN n % 50 = 0 THEN 'started' ELSE 'succeeded' END, n, n "
            "FROM generate_series(1, 40000) AS n"
        )
        conn.execute("ANALYZE lc_jobs")
    listing = (
        "SELECT * FROM lc_jobs WHERE TRUE AND state = 'started' AND user_id = 'user-7' "
        "ORDER BY created_at DESC, job_id DESC LIMIT 100"
    )
    got = plan(pg_url, listing)
    assert "lc_jobs_user_state_created" in got, got
    assert "BitmapAnd" not in got and "lc_jobs_deadline" not in got, got
