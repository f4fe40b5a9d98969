"""The SQL loader: named queries, the schema and the numbered migrations of each dialect."""

from __future__ import annotations

import re

import pytest

from longcall.store import queries as sql


def test_both_dialects_define_the_same_query_names() -> None:
    """SQLite and PostgreSQL define exactly the same set of named queries."""
    sqlite_names = set(sql.queries("sqlite"))
    postgres_names = set(sql.queries("postgres"))
    assert sqlite_names == postgres_names
    assert {"insert_job", "finish_job", "claim_job", "attach_job", "notify"} <= sqlite_names


@pytest.mark.parametrize("dialect", sql.DIALECTS)
def test_every_loaded_query_has_sql_without_comments_or_trailing_semicolon(dialect: str) -> None:
    """Each loaded query is a non-empty statement with comment lines and the ';' removed."""
    loaded = sql.queries(dialect)
    assert len(loaded) >= 30
    for name, text in loaded.items():
        assert text, name
        assert not text.endswith(";"), name
        assert all(not line.lstrip().startswith("--") for line in text.splitlines()), name


def test_parse_queries_splits_named_blocks() -> None:
    """parse_queries maps each '-- name:' header to its statement, dropping comments and ';'."""
    text = (
        "-- file header, ignored\n"
        "\n"
        "-- name: first\n"
        "-- a comment about the first query\n"
        "SELECT 1;\n"
        "\n"
        "-- name: second\n"
        "SELECT 2\n"
        "FROM t;\n"
    )
    assert sql.parse_queries(text) == {"first": "SELECT 1", "second": "SELECT 2\nFROM t"}


def test_parse_queries_rejects_a_duplicated_name() -> None:
    """A query name defined twice is an error naming the query."""
    text = "-- name: twice\nSELECT 1;\n\n-- name: twice\nSELECT 2;\n"
    with pytest.raises(ValueError, match="'twice' is defined twice"):
        sql.parse_queries(text)


def test_parse_queries_rejects_an_empty_query() -> None:
    """A name followed only by comments and blank lines is an error naming the query."""
    text = (
        "-- name: ok\nSELECT 1;\n\n-- name: hollow\n-- only a comment\n\n-- name: more\nSELECT 3;"
    )
    with pytest.raises(ValueError, match="'hollow' is empty"):
        sql.parse_queries(text)


def test_parse_queries_of_text_without_names_is_empty() -> None:
    """Text with no '-- name:' header yields no queries."""
    assert sql.parse_queries("-- just a comment\nSELECT 1;\n") == {}


@pytest.mark.parametrize("dialect", sql.DIALECTS)
def test_migrations_are_numbered_one_to_n(dialect: str) -> None:
    """Migrations are numbered 1..n without gaps and the latest version is n."""
    found = sql.migrations(dialect)
    assert len(found) >= 1
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert sql.latest_version(dialect) == len(found)
    assert found[0].name == "jobs"
    for migration in found:
        assert any(ddl in migration.sql.upper() for ddl in ("CREATE", "ALTER", "DROP"))


def test_both_dialects_have_the_same_migration_versions() -> None:
    """The two dialects are at the same schema version, migration for migration."""
    sqlite = [(m.version, m.name) for m in sql.migrations("sqlite")]
    postgres = [(m.version, m.name) for m in sql.migrations("postgres")]
    assert sqlite == postgres


@pytest.mark.parametrize("dialect", sql.DIALECTS)
def test_schema_loads(dialect: str) -> None:
    """schema() returns the new-install script creating every longcall table."""
    text = sql.schema(dialect)
    for table in (
        "lc_jobs",
        "lc_job_events",
        "lc_outbox",
        "lc_session_leases",
        "lc_runs",
        "lc_cron",
    ):
        assert f"CREATE TABLE {table} (" in text


def test_unknown_dialect_is_refused() -> None:
    """Asking for a dialect longcall does not ship raises ValueError naming it."""
    with pytest.raises(ValueError, match="unknown SQL dialect 'mysql'"):
        sql.schema("mysql")
    with pytest.raises(ValueError, match="unknown SQL dialect 'mysql'"):
        sql.queries("mysql")


def test_with_limit_spells_a_statements_limit_out() -> None:
    """A claim's LIMIT is written into its text, one text per limit; PostgreSQL's claims
    carry the mark, SQLite's bind the limit as any other parameter."""
    text = f"SELECT 1 FROM t ORDER BY a LIMIT {sql.LIMIT_MARK}"
    assert sql.with_limit(text, 3) == "SELECT 1 FROM t ORDER BY a LIMIT 3"
    assert sql.with_limit(text, 0).endswith("LIMIT 0")
    marked = {n for n, q in sql.queries("postgres").items() if sql.LIMIT_MARK in q}
    assert {"claim_runs", "claim_candidates", "overdue_jobs", "due_crons"} <= marked
    assert not any(sql.LIMIT_MARK in q for q in sql.queries("sqlite").values())


@pytest.mark.parametrize("limit", [-1, True, 2.0, "2", None])
def test_with_limit_takes_only_a_whole_number_of_at_least_zero(limit: object) -> None:
    """Whatever is written into SQL is a plain non-negative int, never text."""
    with pytest.raises(ValueError, match="LIMIT must be a whole number"):
        sql.with_limit(f"SELECT 1 LIMIT {sql.LIMIT_MARK}", limit)  # type: ignore[arg-type]


def test_a_statement_is_sent_with_its_limit_written_in_only_where_marked() -> None:
    """as_sent writes the limit into a marked statement and leaves any other one as it is,
    ``limit`` parameter or not (a listing binds its LIMIT)."""
    marked = f"SELECT 1 FROM t LIMIT {sql.LIMIT_MARK}"
    assert sql.as_sent(marked, {"limit": 4, "now": None}) == "SELECT 1 FROM t LIMIT 4"
    bound = "SELECT 1 FROM t LIMIT %(limit)s"
    assert sql.as_sent(bound, {"limit": 4}) == bound
    assert sql.as_sent("SELECT 1", {}) == "SELECT 1"
    with pytest.raises(ValueError, match="LIMIT must be a whole number"):
        sql.as_sent(marked, {"limit": "4"})


def test_the_listings_are_the_statements_whose_plans_depend_on_their_values() -> None:
    """PostgreSQL plans every statement once per connection except these, sent with their
    values: a new statement with optional filters or a LIMIT parameter must join them, or
    it would keep the one plan made for whichever filters it was first sent with."""
    postgres = sql.queries("postgres")
    assert sql.PLANNED_WITH_VALUES.issubset(postgres)
    optional_filter = re.compile(r"%\(\w+\)s(::\w+)?\s+IS NULL OR \w+\s*[<>=]")
    limit_parameter = re.compile(r"LIMIT\s+%\(\w+\)s")
    value_dependent = {
        name
        for name, text in postgres.items()
        if optional_filter.search(text) or limit_parameter.search(text)
    }
    assert value_dependent == sql.PLANNED_WITH_VALUES
