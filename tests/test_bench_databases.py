"""The benchmarks' databases: unique names, and only what a run created is ever dropped."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from conftest import PG_ADMIN_URL

pytestmark = pytest.mark.postgres


def bench_module() -> ModuleType:
    path = Path(__file__).parent.parent / "bench" / "pg_databases.py"
    spec = importlib.util.spec_from_file_location("pg_databases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def existing(prefix: str) -> set[str]:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",)
        ).fetchall()
    return {row[0] for row in rows}


def test_a_run_drops_what_it_made_and_refuses_a_name_someone_else_has(pg_template: str) -> None:
    """Two runs with their own prefixes never touch each other's databases; a name that is
    taken already stops the run instead of being dropped; drop_all drops only its own."""
    module = bench_module()
    prefix = f"lcb_{uuid.uuid4().hex[:8]}"
    mine = module.BenchDatabases(PG_ADMIN_URL, prefix)
    theirs = module.BenchDatabases(PG_ADMIN_URL, prefix + "_other")
    try:
        url = mine.fresh("jobs")
        assert url.endswith(f"/{prefix}_jobs")
        assert mine.fresh("jobs") == url  # made anew: this run created it
        theirs.fresh("jobs")
        intruder = module.BenchDatabases(PG_ADMIN_URL, prefix)  # same names, another run
        with pytest.raises(SystemExit, match="already exists and this run did not create it"):
            intruder.fresh("jobs")
        intruder.drop_all()
        assert existing(prefix) == {f"{prefix}_jobs", f"{prefix}_other_jobs"}
        mine.drop_all()
        assert existing(prefix) == {f"{prefix}_other_jobs"}
    finally:
        mine.drop_all()
        theirs.drop_all()
    assert existing(prefix) == set()


def test_unique_prefixes_by_default_and_a_bad_prefix_is_refused() -> None:
    """Without a prefix each run gets its own; one that is not a plain name is refused."""
    module = bench_module()
    first = module.BenchDatabases(PG_ADMIN_URL)
    second = module.BenchDatabases(PG_ADMIN_URL)
    assert first.prefix != second.prefix and first.prefix.startswith("bench_")
    with pytest.raises(SystemExit, match="--db-prefix"):
        module.BenchDatabases(PG_ADMIN_URL, "x; DROP DATABASE postgres")
