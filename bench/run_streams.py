"""Durable run streams (``ctx.stream`` → ``app.read_stream``): 1,000 small chunks.

Run:  python bench/run_streams.py                     (SQLite and PostgreSQL)
      python bench/run_streams.py --chunks 5000 --skip-pg
      python bench/run_streams.py --pg postgresql://postgres@127.0.0.1:5432/postgres

(``bench/streams.py`` is another benchmark: the server's cost of open event streams.)

For each backend there is a fresh store (a SQLite file, WAL and ``synchronous=FULL`` as
longcall opens it; a fresh PostgreSQL database beside ``--pg``, dropped at the end) and:

- *write*: one run whose task calls ``ctx.stream("tokens", {"n": i})`` ``--chunks`` times,
  one commit each, timed inside the task: chunks a second.
- *read*: ``list(app.read_stream(run_id, "tokens"))`` after the run ended: chunks a second.
- *latency burst*: a run writes the chunks as fast as it can on one thread while this one
  reads them live with ``app.read_stream``; each chunk carries ``time.perf_counter()`` at its
  write, so latency is when the reader got it less when it was written (p50, p99, max).
- *latency paced*: the same, one chunk every ``--gap`` ms (the reader polls 5 ms after an
  item, backing off to 200 ms when quiet: this shows what a token stream sees).

The baseline, in the same run, is the raw driver doing the same work (DBOS is not installed
here; with it, its ``write_stream``/``read_stream`` would be the one to compare): an
``INSERT`` of the next seq with ``MAX(seq) + 1``, one commit per chunk, into a table with the
same key, and one ``SELECT`` of all rows to read; its live reader polls every 5 ms. What the
baseline leaves out and longcall pays for: the run's ownership check on every write (the run
must still be this worker's), the replay key (origin), JSON encoding, and the reader's check
of the run's status.
"""

from __future__ import annotations

import argparse
import importlib.util
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longcall import App
from longcall.workflows import TaskContext
from pg_databases import BenchDatabases, add_prefix_option


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_line(name: str, ms: list[float]) -> str:
    return (
        f"  {name:<24} p50 {statistics.median(ms):7.2f} ms   p99 {pct(ms, 0.99):7.2f} ms"
        f"   max {max(ms):7.2f} ms"
    )


# -- longcall ---------------------------------------------------------------------------------


def longcall_app(url: str) -> App:
    app = App(url, migrate=True)

    @app.task
    def speak(chunks: int, gap: float, ctx: TaskContext) -> float:
        started = time.perf_counter()
        for n in range(chunks):
            ctx.stream("tokens", {"n": n, "at": time.perf_counter()})
            if gap:
                time.sleep(gap)
        return time.perf_counter() - started

    @app.workflow("speaker")
    def speaker(talk: dict[str, Any], ctx: TaskContext) -> float:
        return speak(talk["chunks"], talk["gap"])

    return app


def longcall_figures(url: str, chunks: int, gap: float) -> dict[str, Any]:
    with longcall_app(url) as app:
        run = app.submit_run("speaker", {"chunks": chunks, "gap": 0.0})
        done = app.continue_run(run.run_id)
        write_rate = chunks / done.result
        started = time.perf_counter()
        items = list(app.read_stream(run.run_id, "tokens"))
        read_rate = len(items) / (time.perf_counter() - started)
        assert [i.value["n"] for i in items] == list(range(chunks))

        def live(pace: float) -> list[float]:
            run = app.submit_run("speaker", {"chunks": chunks, "gap": pace})
            writer = threading.Thread(target=app.continue_run, args=(run.run_id,))
            writer.start()
            ms = []
            for item in app.read_stream(run.run_id, "tokens", timeout=60):
                ms.append((time.perf_counter() - item.value["at"]) * 1000)
            writer.join()
            assert len(ms) == chunks
            return ms

        return {
            "write": write_rate,
            "read": read_rate,
            "burst": live(0.0),
            "paced": live(gap),
        }


# -- the raw driver ---------------------------------------------------------------------------


class Raw:
    """The same inserts and reads with the driver alone."""

    def __init__(self, connect: Callable[[], Any], placeholder: str) -> None:
        self.connect = connect
        p = placeholder
        self.insert = (
            "INSERT INTO raw_streams (stream, seq, value) SELECT "
            f"{p}, COALESCE(MAX(seq), 0) + 1, {p} FROM raw_streams WHERE stream = {p}"
        )
        self.select = f"SELECT seq, value FROM raw_streams WHERE stream = {p} AND seq > {p}"
        with self.connect() as conn:
            conn.execute(
                "CREATE TABLE raw_streams (stream TEXT NOT NULL, seq INTEGER NOT NULL, "
                "value TEXT NOT NULL, PRIMARY KEY (stream, seq))"
            )
            conn.commit()

    def write(self, stream: str, chunks: int, gap: float) -> float:
        conn = self.connect()
        try:
            started = time.perf_counter()
            for n in range(chunks):
                value = f'{{"n":{n},"at":{time.perf_counter()!r}}}'
                conn.execute(self.insert, (stream, value, stream))
                conn.commit()
                if gap:
                    time.sleep(gap)
            return time.perf_counter() - started
        finally:
            conn.close()

    def read(self, stream: str, after: int = 0) -> list[tuple[int, str]]:
        conn = self.connect()
        try:
            rows = list(conn.execute(self.select, (stream, after)).fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()

    def live(self, stream: str, chunks: int, gap: float) -> list[float]:
        import json

        writer = threading.Thread(target=self.write, args=(stream, chunks, gap))
        writer.start()
        ms: list[float] = []
        after = 0
        conn = self.connect()
        try:
            while len(ms) < chunks:
                rows = list(conn.execute(self.select, (stream, after)).fetchall())
                conn.commit()
                now = time.perf_counter()
                for seq, value in rows:
                    after = seq
                    ms.append((now - json.loads(value)["at"]) * 1000)
                if not rows:
                    time.sleep(0.005)
        finally:
            conn.close()
        writer.join()
        return ms

    def figures(self, chunks: int, gap: float) -> dict[str, Any]:
        write_rate = chunks / self.write("w", chunks, 0.0)
        started = time.perf_counter()
        rows = self.read("w")
        read_rate = len(rows) / (time.perf_counter() - started)
        return {
            "write": write_rate,
            "read": read_rate,
            "burst": self.live("b", chunks, 0.0),
            "paced": self.live("p", chunks, gap),
        }


def raw_sqlite(path: Path) -> Raw:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=10)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    return Raw(connect, "?")


def raw_postgres(url: str) -> Raw:
    import psycopg

    return Raw(lambda: psycopg.connect(url), "%s")


# -- the report ------------------------------------------------------------------------------


def report(backend: str, chunks: int, gap: float, ours: dict[str, Any], raw: dict[str, Any]):
    print(f"\n{backend}: {chunks} chunks")
    print(f"  {'':<24} {'longcall':>12} {'raw driver':>12}")
    print(f"  {'write (chunks/s)':<24} {ours['write']:12,.0f} {raw['write']:12,.0f}")
    print(f"  {'read (chunks/s)':<24} {ours['read']:12,.0f} {raw['read']:12,.0f}")
    print(" end-to-end latency, longcall:")
    print(latency_line("burst", ours["burst"]))
    print(latency_line(f"paced ({gap * 1000:g} ms)", ours["paced"]))
    print(" end-to-end latency, raw driver (reader polls every 5 ms):")
    print(latency_line("burst", raw["burst"]))
    print(latency_line(f"paced ({gap * 1000:g} ms)", raw["paced"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--gap", type=float, default=2.0, help="ms between paced chunks")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    add_prefix_option(parser)
    args = parser.parse_args()
    gap = args.gap / 1000
    print(__doc__.split("\n\n")[0])
    dbos = importlib.util.find_spec("dbos") is not None
    note = "installed, not measured here" if dbos else "not installed"
    print(f"python {sys.version.split()[0]}; DBOS {note}: the baseline is the raw driver")
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as folder:
            ours = longcall_figures(f"sqlite:///{folder}/longcall.db", args.chunks, gap)
            raw = raw_sqlite(Path(folder) / "raw.db").figures(args.chunks, gap)
        report("SQLite (WAL, synchronous=FULL)", args.chunks, gap, ours, raw)
    if not args.skip_pg:
        databases = BenchDatabases(args.pg, args.db_prefix)
        try:
            ours = longcall_figures(databases.fresh("streams_longcall"), args.chunks, gap)
            raw = raw_postgres(databases.fresh("streams_raw")).figures(args.chunks, gap)
        finally:
            databases.drop_all()
        report("PostgreSQL", args.chunks, gap, ours, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
