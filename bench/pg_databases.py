"""The PostgreSQL databases a benchmark makes for itself, and drops only if it made them.

The server a benchmark runs against is shared (CI, tests and other work use it too), so its
databases get names no one else has (a prefix unique to the run unless ``--db-prefix`` or
``LONGCALL_BENCH_DB_PREFIX`` names one), and a database is dropped only by the run that
created it. A name that is already taken by someone else stops the benchmark with a message.
"""

from __future__ import annotations

import argparse
import os
import uuid

PREFIX_VARIABLE = "LONGCALL_BENCH_DB_PREFIX"


def add_prefix_option(parser: argparse.ArgumentParser) -> None:
    """``--db-prefix``: the start of every database name this run creates."""
    parser.add_argument(
        "--db-prefix",
        default=os.environ.get(PREFIX_VARIABLE),
        help=f"database names start with this (default ${PREFIX_VARIABLE}, else unique per run)",
    )


class BenchDatabases:
    """Fresh databases beside ``admin_url``, named ``<prefix>_<name>``."""

    def __init__(self, admin_url: str, prefix: str | None = None) -> None:
        self.admin_url = admin_url
        self.prefix = prefix or f"bench_{uuid.uuid4().hex[:8]}"
        if not self.prefix.replace("_", "").isalnum() or not self.prefix[0].isalpha():
            raise SystemExit(f"--db-prefix {self.prefix!r}: use letters, digits and _")
        self._created: set[str] = set()

    def fresh(self, name: str) -> str:
        """The URL of an empty database for ``name``; one this run made before is made anew."""
        import psycopg

        full = f"{self.prefix}_{name}".lower()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if full in self._created:
                conn.execute(f"DROP DATABASE IF EXISTS {full} WITH (FORCE)")
            try:
                conn.execute(f"CREATE DATABASE {full}")
            except psycopg.errors.DuplicateDatabase:
                raise SystemExit(
                    f"database {full} already exists and this run did not create it;"
                    " pick another --db-prefix"
                ) from None
        self._created.add(full)
        return self.admin_url.rpartition("/")[0] + f"/{full}"

    def drop_all(self) -> None:
        """Drop every database this run created, and nothing else."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for full in sorted(self._created):
                conn.execute(f"DROP DATABASE IF EXISTS {full} WITH (FORCE)")
        self._created.clear()
