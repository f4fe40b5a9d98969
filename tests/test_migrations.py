"""Schema and migrations: every migration in turn gives schema.sql; version checks never run DDL."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

import longcall
from longcall.store import Store, open_store
from longcall.store import queries as sql

# -- talking to the database behind the store's back ---------------------------------------


def _sqlite_path(url: str) -> str:
    return urlsplit(url).path[1:]


def _normalise(text: str | None) -> str | None:
    """SQL text without comments and with whitespace collapsed (and none around punctuation)."""
    if text is None:
        return None
    text = re.sub(r"--[^\n]*", "", text)
    text = " ".join(text.split())
    return re.sub(r"\s*([(),;])\s*", r"\1", text)


def sqlite_query(url: str, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(_sqlite_path(url))
    try:
        with conn:
            return [tuple(r) for r in conn.execute(query).fetchall()]
    finally:
        conn.close()


def pg_query(url: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def sqlite_catalog(url: str) -> dict[str, Any]:
    """Everything SQLite knows of the schema, independent of how it was created."""

    def q(query: str) -> list[tuple[Any, ...]]:
        return sqlite_query(url, query)

    objects = sorted(
        (kind, name, table, _normalise(text))
        for kind, name, table, text in q(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        )
    )
    tables = [name for kind, name, _, _ in objects if kind == "table"]
    indexes = [name for kind, name, _, _ in objects if kind == "index"]
    return {
        "objects": objects,
        "columns": {t: q(f"PRAGMA table_info({t})") for t in tables},
        # index_list's first column is a creation-order counter: leave it out.
        "index_list": {t: sorted(r[1:] for r in q(f"PRAGMA index_list({t})")) for t in tables},
        "index_columns": {i: q(f"PRAGMA index_xinfo({i})") for i in indexes},
        "foreign_keys": {t: q(f"PRAGMA foreign_key_list({t})") for t in tables},
        # The bookkeeping rows differ in name and time; what matters is the version reached.
        "version": q("SELECT MAX(version) FROM lc_migrations"),
    }


def pg_catalog(url: str) -> dict[str, Any]:
    """Everything PostgreSQL knows of the public schema, independent of how it was created."""

    def q(query: str) -> list[tuple[Any, ...]]:
        return sorted(pg_query(url, query))

    return {
        "tables": q(
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema = 'public'"
        ),
        # Rows are mapped by column name, so columns are compared without their position.
        "columns": q(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, "
            "numeric_precision FROM information_schema.columns WHERE table_schema = 'public'"
        ),
        "indexes": q(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        ),
        "constraints": q(
            "SELECT c.conrelid::regclass::text, c.conname, c.contype::text, "
            "pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public'"
        ),
        "functions": q(
            "SELECT p.proname::text, pg_get_function_identity_arguments(p.oid), "
            "pg_get_function_result(p.oid), p.provolatile::text, p.prosrc FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
        ),
        "triggers": q(
            "SELECT c.relname::text, t.tgname::text, pg_get_triggerdef(t.oid) FROM pg_trigger t "
            "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND NOT t.tgisinternal"
        ),
        "version": q("SELECT MAX(version) FROM lc_migrations"),
    }


@dataclass
class EmptyDb:
    """An empty database of one backend, and ways to inspect it without the store."""

    url: str
    dialect: str
    query: Callable[[str, str], list[tuple[Any, ...]]]
    catalog: Callable[[str], dict[str, Any]]
    another: Callable[[], str]  # the URL of a second, empty database of the same kind

    def run(self, query: str, url: str | None = None) -> list[tuple[Any, ...]]:
        return self.query(url or self.url, query)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db(request: pytest.FixtureRequest) -> EmptyDb:
    """An empty database without longcall's schema, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url = str(request.getfixturevalue("sqlite_url"))
        return EmptyDb(
            url,
            "sqlite",
            sqlite_query,
            sqlite_catalog,
            lambda: url.replace("longcall.db", "second.db"),
        )
    url = str(request.getfixturevalue("empty_pg_url"))

    def wipe() -> str:
        # The same database emptied again: a second database per test is not needed.
        pg_query(url, "DROP SCHEMA public CASCADE")
        pg_query(url, "CREATE SCHEMA public")
        return url

    return EmptyDb(url, "postgres", pg_query, pg_catalog, wipe)


def migrated(url: str, *, stepwise: bool) -> list[int]:
    store = open_store(url, longcall.FakeClock())
    try:
        return store.migrate(stepwise=stepwise)
    finally:
        store.close()


# -- the tests -----------------------------------------------------------------------------


def test_every_migration_in_turn_gives_the_schema(empty_db: EmptyDb) -> None:
    """Applying migrations 1..n stepwise leaves the same catalog as schema.sql in one step."""
    latest = sql.latest_version(empty_db.dialect)
    assert migrated(empty_db.url, stepwise=True) == list(range(1, latest + 1))
    stepwise = empty_db.catalog(empty_db.url)
    assert stepwise["version"] == [(latest,)]

    other = empty_db.another()
    assert migrated(other, stepwise=False) == [latest]
    in_one_step = empty_db.catalog(other)

    assert stepwise == in_one_step
    # Sanity: the catalog really describes longcall's tables (an empty compare proves nothing).
    expected_tables = {
        "lc_jobs",
        "lc_job_events",
        "lc_outbox",
        "lc_session_leases",
        "lc_inbox",
        "lc_early_results",
        "lc_webhook_secrets",
        "lc_tokens",
        "lc_runs",
        "lc_queues",
        "lc_queue_starts",
        "lc_run_steps",
        "lc_run_interrupts",
        "lc_run_events",
        "lc_run_messages",
        "lc_run_values",
        "lc_run_streams",
        "lc_cron",
        "lc_cron_fires",
        "lc_workers",
        "lc_logins",
        "lc_migrations",
        "lc_job_counts",
    }
    job_fields = set(longcall.Job.__dataclass_fields__)
    if empty_db.dialect == "sqlite":
        assert {n for k, n, _, _ in in_one_step["objects"] if k == "table"} == expected_tables
        triggers = {n for k, n, _, _ in in_one_step["objects"] if k == "trigger"}
        job_columns = {c[1] for c in in_one_step["columns"]["lc_jobs"]}
    else:
        assert {t for t, _ in in_one_step["tables"]} == expected_tables | {"lc_job_count_changes"}
        job_columns = {c for t, c, *_ in in_one_step["columns"] if t == "lc_jobs"}
        assert [f[0] for f in in_one_step["functions"]] == ["lc_count_job_change", "lc_now"]
        triggers = {n for _, n, _ in in_one_step["triggers"]}
    assert triggers == {"lc_jobs_counted", "lc_jobs_recounted"} | (
        {"lc_jobs_uncounted"} if empty_db.dialect == "sqlite" else set()
    )
    assert job_fields <= job_columns


def test_migrate_twice_applies_nothing_the_second_time(empty_db: EmptyDb) -> None:
    """A second migrate() on an up-to-date database applies nothing and records nothing."""
    latest = sql.latest_version(empty_db.dialect)
    store = open_store(empty_db.url, longcall.FakeClock())
    try:
        assert store.schema_version() is None
        assert store.migrate() == [latest]
        assert store.migrate() == []
        assert store.migrate(stepwise=True) == []
        assert store.schema_version() == latest
    finally:
        store.close()
    assert empty_db.run("SELECT version, name FROM lc_migrations") == [(latest, "schema")]


def test_stepwise_then_migrate_applies_nothing(empty_db: EmptyDb) -> None:
    """After a stepwise migration, migrate() finds nothing left and one row per migration."""
    latest = sql.latest_version(empty_db.dialect)
    assert migrated(empty_db.url, stepwise=True) == list(range(1, latest + 1))
    assert migrated(empty_db.url, stepwise=False) == []
    rows = empty_db.run("SELECT version, name FROM lc_migrations ORDER BY version")
    assert rows == [(m.version, m.name) for m in sql.migrations(empty_db.dialect)]


def test_app_without_migrate_on_an_empty_database_names_the_command(empty_db: EmptyDb) -> None:
    """App(url, migrate=False) on an empty db raises SchemaError naming `longcall migrate`."""
    with pytest.raises(longcall.SchemaError, match="`longcall migrate`") as info:
        longcall.App(empty_db.url, clock=longcall.FakeClock(), migrate=False)
    assert "no longcall schema" in str(info.value)
    store = open_store(empty_db.url, longcall.FakeClock())
    try:
        assert store.schema_version() is None
    finally:
        store.close()


def test_app_without_migrate_on_a_current_database_opens(empty_db: EmptyDb) -> None:
    """App(url, migrate=False) on an up-to-date database opens and works."""
    migrated(empty_db.url, stepwise=False)
    with longcall.App(empty_db.url, clock=longcall.FakeClock(), migrate=False) as app:
        assert app.store.schema_version() == sql.latest_version(empty_db.dialect)
        assert app.list_jobs() == []


def test_newer_schema_than_the_code_is_refused(empty_db: EmptyDb) -> None:
    """A database at a version newer than the code raises SchemaError, migrating or not."""
    latest = sql.latest_version(empty_db.dialect)
    migrated(empty_db.url, stepwise=False)
    future = latest + 1
    applied_at = "1" if empty_db.dialect == "sqlite" else "now()"
    empty_db.run(
        f"INSERT INTO lc_migrations (version, name, applied_at) "
        f"VALUES ({future}, 'future', {applied_at})"
    )
    with pytest.raises(longcall.SchemaError, match=f"version {future}, newer than this longcall"):
        longcall.App(empty_db.url, clock=longcall.FakeClock())
    with pytest.raises(longcall.SchemaError, match=f"version {future}, newer than this longcall"):
        longcall.App(empty_db.url, clock=longcall.FakeClock(), migrate=False)
    store = open_store(empty_db.url, longcall.FakeClock())
    try:
        with pytest.raises(longcall.SchemaError, match="upgrade longcall"):
            store.migrate()
        assert store.schema_version() == future
    finally:
        store.close()
    assert empty_db.run("SELECT COUNT(*) FROM lc_migrations") == [(2,)]


@pytest.mark.parametrize("stepwise", [False, True], ids=["schema", "stepwise"])
def test_concurrent_migrations_apply_the_schema_once(empty_db: EmptyDb, stepwise: bool) -> None:
    """Two threads migrating one empty database both succeed, and each version is applied once."""
    latest = sql.latest_version(empty_db.dialect)
    stores = [open_store(empty_db.url, longcall.FakeClock()) for _ in range(2)]
    barrier = threading.Barrier(len(stores))
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run(store: Store) -> None:
        try:
            barrier.wait(timeout=10)
            results.append(store.migrate(stepwise=stepwise))
        except BaseException as exc:  # reported below, with the thread's traceback
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for store in stores:
        store.close()
    assert errors == []
    assert len(results) == 2
    expected = list(range(1, latest + 1)) if stepwise else [latest]
    assert sorted(v for applied in results for v in applied) == expected
    if not stepwise:
        assert [] in results  # the one that came second found nothing to do
    # (Stepwise, the two may share the steps: one applies 1, the other 2; each once.)
    rows = empty_db.run("SELECT version FROM lc_migrations ORDER BY version")
    assert rows == [(v,) for v in expected]
    assert empty_db.run("SELECT COUNT(*) FROM lc_jobs") == [(0,)]
