"""Shared fixtures: a fresh store per test on SQLite and on a real PostgreSQL.

PostgreSQL tests use a template database built once per run and a fresh database per test
(``CREATE DATABASE … TEMPLATE``). Without a server they skip with the reason, except under
``CI=true``, where a missing server fails the run instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longcall.core.clock import FakeClock
from longcall.store import Store, open_store
from pg_cluster import ClusterUnavailable, ThrowawayCluster

PG_ADMIN_URL = os.environ.get("LONGCALL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
# One template per test run, so runs sharing a server do not drop each other's.
TEMPLATE = f"longcall_test_template_{os.getpid()}"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path("/usr/bin/chromium")


def _pg_url(dbname: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{dbname}"


def _admin_execute(*statements: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """The template database with longcall's schema, built once per test run."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5):
            pass
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"CI=true but PostgreSQL is unreachable at {PG_ADMIN_URL}: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {PG_ADMIN_URL} ({exc}); set LONGCALL_TEST_PG")
    _admin_execute(
        f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)", f"CREATE DATABASE {TEMPLATE}"
    )
    from longcall.core.clock import SystemClock
    from longcall.store.postgres import PostgresStore

    store = PostgresStore(_pg_url(TEMPLATE), SystemClock(), pool_size=1)
    store.migrate()
    store.close()
    yield TEMPLATE
    _admin_execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database with the schema, dropped after the test."""
    name = f"longcall_test_{uuid.uuid4().hex[:12]}"
    _admin_execute(f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    try:
        yield _pg_url(name)
    finally:
        _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def empty_pg_url(pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database without longcall's schema."""
    name = f"longcall_test_{uuid.uuid4().hex[:12]}"
    _admin_execute(f"CREATE DATABASE {name}")
    try:
        yield _pg_url(name)
    finally:
        _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file that does not exist yet (no schema)."""
    return f"sqlite:///{tmp_path / 'longcall.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database with longcall's schema: each test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url = str(request.getfixturevalue("sqlite_url"))
        from longcall.core.clock import SystemClock
        from longcall.store import open_store

        store = open_store(url, SystemClock())
        store.migrate()
        store.close()
        return url
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test moves it."""
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    """The store on a fresh database with longcall's schema, on the fake clock."""
    opened = open_store(db_url, clock)
    # db_url's SQLite file starts empty (PostgreSQL's comes from a migrated template).
    opened.migrate()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def throwaway_pg() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL cluster of the test's own, which it may stop, crash and restart.

    Never the machine's server nor ``LONGCALL_TEST_PG``'s: those are shared. Skips where
    PostgreSQL's server binaries are missing, except under ``CI=true``, where it fails.
    """
    try:
        cluster = ThrowawayCluster()
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but no throwaway PostgreSQL cluster can run here: {exc}")
        pytest.skip(f"no throwaway PostgreSQL cluster: {exc}")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium under Playwright (its own browser download is not used)."""
    if not CHROMIUM.exists():
        if IN_CI:
            pytest.fail(f"CI=true but there is no browser at {CHROMIUM}")
        pytest.skip(f"no browser at {CHROMIUM}; install Debian's chromium package")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if IN_CI:
            raise
        pytest.skip("playwright is not installed (pip install --group test)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield chromium
        chromium.close()
