"""Loads the SQL that lives beside this module: named queries, the schema and migrations.

``sql/<dialect>/queries.sql`` (and ``queries_<part>.sql`` beside it) holds blocks headed
``-- name: <query>``; both dialects define
the same names. ``schema.sql`` creates a new install at the latest version; ``NNNN_*.sql``
are the numbered migrations, applied in order, that reach the same schema from any older one.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

DIALECTS = ("sqlite", "postgres")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_QUERIES = re.compile(r"^queries(_\w+)?\.sql$")
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")
_OPTIONAL = re.compile(r"^\s*/\*if (\w+)\*/.*$\n?", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def _read(dialect: str, filename: str) -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    return (resources.files("longcall.store") / "sql" / dialect / filename).read_text("utf-8")


def parse_queries(text: str) -> dict[str, str]:
    """Split a queries file into ``{name: sql}``; a name given twice is an error."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";")
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = sql
    return queries


@cache
def queries(dialect: str) -> dict[str, str]:
    """The named queries of one dialect: ``queries.sql`` and each ``queries_<part>.sql``."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    folder = resources.files("longcall.store") / "sql" / dialect
    names = sorted(f.name for f in folder.iterdir() if _QUERIES.match(f.name))
    found: dict[str, str] = {}
    for name in names:
        for query, sql in parse_queries(_read(dialect, name)).items():
            if query in found:
                raise ValueError(f"query {query!r} is defined twice ({name})")
            found[query] = sql
    return found


# Where a statement's LIMIT is written into its text instead of sent as a parameter. The
# statements that claim work run again and again with a few small limits. PostgreSQL plans a
# LIMIT parameter as a tenth of the rows, so once the table has statistics the generic plan
# looks far dearer than each custom one, and every execution was planned afresh: about
# 0.4 ms a run claim, and a backlog of runs drained 40% slower. One text per limit keeps one
# plan each. Listings keep their parameters: their filters want the custom plans.
LIMIT_MARK = "{limit}"

# A line of a listing that starts with ``/*if x*/`` is sent only when the parameter ``x`` is
# given (not None): each set of filters gets a statement of its own, which the planner can
# serve from the index that fits. Written as ``(x IS NULL OR col = x)``, a filter kept SQLite
# on a scan of the whole table whatever was given.
OPTIONAL_MARK = "/*if "

# The listings: their best plan depends on which filters are given and on their values, so
# PostgreSQL's store sends them with their values written in, planned afresh each time, where
# it plans every other statement once per connection (a generic plan).
PLANNED_WITH_VALUES = frozenset(
    {"list_jobs", "search_jobs", "changed_jobs", "list_runs", "list_cron", "cron_fires"}
)


@lru_cache(maxsize=512)
def with_filters(sql: str, given: frozenset[str]) -> str:
    """``sql`` without its optional lines (:data:`OPTIONAL_MARK`) whose parameter is not in
    ``given``, and without the marks of those it keeps."""

    def keep(line: re.Match[str]) -> str:
        return line[0].replace(f"{OPTIONAL_MARK}{line[1]}*/", "", 1) if line[1] in given else ""

    return _OPTIONAL.sub(keep, sql)


@lru_cache(maxsize=256, typed=True)  # typed: True and 2.0 must not find 1's and 2's text
def with_limit(sql: str, limit: int) -> str:
    """``sql`` with its :data:`LIMIT_MARK` spelled out as ``limit``: one statement text, and
    so one prepared statement and plan, per limit."""
    try:
        count = operator.index(limit)  # any integer type; not a float or a string
    except TypeError:
        count = -1
    if isinstance(limit, bool) or count < 0:
        raise ValueError(f"a LIMIT must be a whole number of at least 0, not {limit!r}")
    return sql.replace(LIMIT_MARK, str(count))


def as_sent(sql: str, params: Mapping[str, Any]) -> str:
    """The text a statement is sent as: only the optional lines whose parameter is given
    (:func:`with_filters`), and its LIMIT written in from ``params["limit"]``
    (:func:`with_limit`) where it carries the :data:`LIMIT_MARK`."""
    if OPTIONAL_MARK in sql:
        given = frozenset(name for name, value in params.items() if value is not None)
        sql = with_filters(sql, given)
    return with_limit(sql, params["limit"]) if LIMIT_MARK in sql else sql


@cache
def schema(dialect: str) -> str:
    """The schema for a new install, at :func:`latest_version`."""
    return _read(dialect, "schema.sql")


@cache
def migrations(dialect: str) -> tuple[Migration, ...]:
    """Every migration of one dialect, in version order, numbered 1, 2, 3 … with no gap."""
    found: list[Migration] = []
    for entry in (resources.files("longcall.store") / "sql" / dialect).iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise ValueError(f"{dialect} migrations are not numbered 1..n without gaps")
    return tuple(found)


def latest_version(dialect: str) -> int:
    return len(migrations(dialect))
