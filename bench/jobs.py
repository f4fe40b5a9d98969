"""The job lifecycle through longcall against the same statements through the raw driver.

Run:  python bench/jobs.py                       (SQLite FULL and NORMAL, PostgreSQL 1 and 8)
      python bench/jobs.py --jobs 5000 --pg postgresql://postgres@127.0.0.1/postgres
      python bench/jobs.py --skip-postgres --open 10000,100000

Each job goes through create, attach, complete, claim, delivery to a no-op agent and mark
delivered. The longcall side uses the public API (the tool wrapper, ``app.attach``,
``app.complete``, the resumer); the raw side runs the very same SQL in the same transactions
with sqlite3 / psycopg and nothing else, so the ratio is what longcall's own code costs.
Every session is its own, the worst case for claims (one session lease per job).

Then it measures claim and sweep latency with 10,000 and 1,000,000 open jobs in the table:
the partial indexes should keep both flat (target: the larger at most 1.5x the smaller).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import longcall
from longcall.agents import AgentEvent, Message
from longcall.store import queries as sql
from longcall.store.base import dumps
from pg_databases import BenchDatabases, add_prefix_option

BATCH = 50
TARGET = 0.6


class NoopAgent:
    """An agent runner that takes every response and says nothing."""

    app_name = "bench"

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        if False:  # pragma: no cover - an async generator that yields nothing
            yield AgentEvent(author="", invocation_id="")

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        return False


# -- longcall -------------------------------------------------------------------------


def longcall_lifecycle(url: str, jobs: int, threads: int) -> float:
    """Jobs per second through the public API, ``threads`` threads sharing one App."""
    app = longcall.App(url, threads=max(threads, 2))

    @app.long_running
    def export(fmt: str, n: int) -> str:
        """Exports data."""
        return "started"

    agent = NoopAgent()

    def run(share: int, prefix: str) -> None:
        loop = asyncio.new_event_loop()
        resumer = app.deliverer(agent, batch=BATCH)
        try:
            for start in range(0, share, BATCH):
                ids = []
                for i in range(start, min(start + BATCH, share)):
                    job_id = export.invoke({"fmt": "csv", "n": i})["jobId"]
                    session = f"{prefix}-{i}"
                    app.attach(job_id, longcall.CallIds("bench", "u", session, f"c-{i}", "inv"))
                    app.complete(job_id, {"rows": i})
                    ids.append(job_id)
                while loop.run_until_complete(resumer.run_once()):
                    pass
        finally:
            loop.close()

    elapsed = _run_threads(run, jobs, threads)
    delivered = app.store.counts().get(("succeeded", "delivered"), 0)
    app.close()
    if delivered < jobs:
        raise SystemExit(f"longcall delivered {delivered} of {jobs} jobs")
    return jobs / elapsed


# -- the raw driver -------------------------------------------------------------------


class RawSqlite:
    def __init__(self, path: str, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA busy_timeout = 5000")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.synchronous = self.level = synchronous
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.row_factory = sqlite3.Row
        self.q = sql.queries("sqlite")

    def tx(self, work: Callable[[Callable[..., list[Any]]], Any], durable: bool = True) -> Any:
        # As longcall's store does: a write whose loss in a power cut costs only a retry
        # commits without an fsync even under synchronous=FULL.
        wanted = self.synchronous if durable else "NORMAL"
        if wanted != self.level:
            self.conn.execute(f"PRAGMA synchronous = {wanted}")
            self.level = wanted
        self.conn.execute("BEGIN IMMEDIATE")
        result = work(lambda name, **p: self.conn.execute(self.q[name], p).fetchall())
        self.conn.execute("COMMIT")
        return result

    def read(self, name: str, **p: Any) -> list[Any]:
        return self.conn.execute(self.q[name], p).fetchall()

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg.rows import dict_row

        from longcall.store.postgres import PREPARE_THRESHOLD, plan_once

        # The session longcall's store sets up: statements prepared and planned once.
        self.conn = psycopg.connect(
            url, autocommit=True, row_factory=dict_row, prepare_threshold=PREPARE_THRESHOLD
        )
        plan_once(self.conn)
        self.q = sql.queries("postgres")

    def tx(self, work: Callable[[Callable[..., list[Any]]], Any], durable: bool = True) -> Any:
        # longcall commits every PostgreSQL transaction synchronously.
        with self.conn.transaction(), self.conn.cursor() as cur:

            def ex(name: str, **p: Any) -> list[Any]:
                cur.execute(sql.as_sent(self.q[name], p), p)
                return cur.fetchall() if cur.description else []

            return work(ex)

    def read(self, name: str, **p: Any) -> list[Any]:
        with self.conn.cursor() as cur:
            cur.execute(sql.as_sent(self.q[name], p), p)
            return cur.fetchall()

    def close(self) -> None:
        self.conn.close()


def raw_lifecycle(
    open_conn: Callable[[], RawSqlite | RawPostgres],
    jobs: int,
    threads: int,
    now: Callable[[], float | None],
) -> float:
    """Jobs per second doing longcall's statements by hand, one connection per thread."""

    def run(share: int, prefix: str) -> None:
        db = open_conn()
        holder = f"raw-{prefix}"
        try:
            for start in range(0, share, BATCH):
                for i in range(start, min(start + BATCH, share)):
                    job_id = f"job-{uuid.uuid4().hex}"
                    args = dumps({"fmt": "csv", "n": i})
                    session = f"{prefix}-{i}"

                    def create(ex: Any, job_id: str = job_id, args: str = args) -> None:
                        ex(
                            "insert_job",
                            job_id=job_id,
                            tool_name="export",
                            args=args,
                            app_name=None,
                            user_id=None,
                            session_id=None,
                            call_id=None,
                            invocation_id=None,
                            deadline=None,
                            cancel_hook=True,
                            trace_context=None,
                            now=now(),
                        )
                        ex(
                            "insert_outbox",
                            job_id=job_id,
                            kind="dispatch",
                            delay=60,
                            holder=holder,
                            now=now(),
                        )
                        ex("take_early_result", job_id=job_id)  # a result from outside first?

                    def dispatched(ex: Any, job_id: str = job_id) -> None:
                        ex("delete_outbox", job_id=job_id, kind="dispatch")
                        ex("set_pending", job_id=job_id, message="started", fields=None, now=now())

                    def attach(
                        ex: Any, job_id: str = job_id, session: str = session, i: int = i
                    ) -> None:
                        ex("get_job_for_update", job_id=job_id)
                        ex(
                            "attach_job",
                            job_id=job_id,
                            app_name="bench",
                            user_id="u",
                            session_id=session,
                            call_id=f"c-{i}",
                            invocation_id="inv",
                            now=now(),
                        )

                    def complete(ex: Any, job_id: str = job_id, i: int = i) -> None:
                        rows = ex(
                            "finish_job",
                            job_id=job_id,
                            state="succeeded",
                            result=dumps({"rows": i}),
                            now=now(),
                        )
                        ex(
                            "insert_event",
                            job_id=job_id,
                            seq=rows[0]["event_seq"],
                            kind="succeeded",
                            data=dumps({"rows": i}),
                            now=now(),
                        )
                        ex("notify", channel="longcall", payload="ready")

                    db.tx(create)
                    db.tx(dispatched, durable=False)
                    db.read("get_job", job_id=job_id)  # longcall reads first: a no-op
                    db.tx(attach)  # attach writes nothing
                    db.tx(complete)
                while True:

                    def claim(ex: Any) -> list[Any]:
                        rows = ex("claim_candidates", now=now(), limit=BATCH)
                        leased = {}
                        for session in sorted({row["session_id"] for row in rows}):
                            lease = ex(
                                "take_session_lease",
                                app_name="",
                                user_id="",
                                session_id=session,
                                holder=holder,
                                kind="resume",
                                ttl=60,
                                now=now(),
                            )
                            if lease:
                                leased[session] = lease[0]["fence"]
                        got = []
                        for session in dict.fromkeys(row["session_id"] for row in rows):
                            if session not in leased:
                                continue
                            ready = (
                                ex(
                                    "session_ready_jobs",
                                    app_name="",
                                    user_id="",
                                    session_id=session,
                                    unscoped=True,
                                    now=now(),
                                )
                                if len(rows) >= BATCH
                                else [row for row in rows if row["session_id"] == session]
                            )
                            for row in ready:
                                got += ex(
                                    "claim_job",
                                    job_id=row["job_id"],
                                    holder=holder,
                                    fence=leased[session],
                                    app_name=None,
                                    lease=60,
                                    now=now(),
                                )
                        return got

                    claimed = db.tx(claim)
                    if not claimed:
                        break

                    def delivered(ex: Any, claimed: list[Any] = claimed) -> None:
                        # longcall commits the deliveries of a pass together (a group commit).
                        for row in claimed:
                            ex(
                                "mark_final_delivered",
                                job_id=row["job_id"],
                                holder=holder,
                                fence=row["claim_fence"],
                                now=now(),
                            )
                            ex(
                                "release_session_lease",
                                app_name="",
                                user_id="",
                                session_id=row["session_id"],
                                holder=holder,
                            )
                        ex("notify", channel="longcall", payload="ready")

                    db.tx(delivered)
        finally:
            db.close()

    return jobs / _run_threads(run, jobs, threads)


def _run_threads(run: Callable[[int, str], None], jobs: int, threads: int) -> float:
    if threads == 1:
        started = time.perf_counter()
        run(jobs, f"s0-{uuid.uuid4().hex[:6]}")
        return time.perf_counter() - started
    shares = [jobs // threads + (1 if t < jobs % threads else 0) for t in range(threads)]
    errors: list[BaseException] = []

    def target(share: int, prefix: str) -> None:
        try:
            run(share, prefix)
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=target, args=(s, f"s{t}-{uuid.uuid4().hex[:6]}"))
        for t, s in enumerate(shares)
    ]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


# -- claim and sweep latency as open jobs pile up --------------------------------------


def fill_open_jobs(store: Any, upto: int, now: float) -> None:
    """Bring the number of open (started, unattached, far from their deadline) jobs to ``upto``."""
    if store.dialect == "sqlite":
        conn = store._conn()
        have = conn.execute("SELECT COUNT(*) FROM lc_jobs WHERE job_id LIKE 'open-%'").fetchone()[0]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "WITH RECURSIVE c(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM c WHERE x < ?) "
            "INSERT INTO lc_jobs (job_id, tool_name, args, state, deadline_at, created_at, "
            "updated_at) SELECT 'open-' || x, 'export', '{}', 'started', ? + 86400 + x, ?, ? "
            "FROM c",
            (have + 1, upto, now, now, now),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    else:
        with store.pool.connection() as conn:
            have = conn.execute(
                "SELECT COUNT(*) AS n FROM lc_jobs WHERE job_id LIKE 'open-%'"
            ).fetchone()["n"]
            conn.execute(
                "INSERT INTO lc_jobs (job_id, tool_name, args, state, deadline_at, created_at, "
                "updated_at) SELECT 'open-' || x, 'export', '{}', 'started', %s + 86400 + x, "
                "%s, %s FROM generate_series(%s::bigint, %s::bigint) AS x",
                (now, now, now, have + 1, upto),
            )
            conn.execute("ANALYZE lc_jobs")


def latency(url: str, sizes: list[int], rounds: int = 40) -> list[tuple[int, float, float]]:
    """Median claim and sweep latency (ms) at each number of open jobs."""
    clock = longcall.FakeClock(time.time())
    app = longcall.App(url, clock=clock)
    store = app.store

    @app.long_running
    def export(n: int) -> str:
        """Exports data."""
        return "started"

    # 100 ready jobs (each its own session) and 100 overdue ones, kept the same at every size.
    for i in range(100):
        job_id = export.invoke({"n": i})["jobId"]
        app.attach(job_id, longcall.CallIds("bench", "u", f"s-{i}", f"c-{i}", "inv"))
        app.complete(job_id, {"rows": i})
    overdue = longcall.App(url, clock=longcall.FakeClock(clock.now() - 7200), migrate=False)
    od = overdue.long_running(deadline="1h", name="late")(lambda n: "started")
    for i in range(100):
        od.invoke({"n": i})
    overdue.close()
    results = []
    for size in sizes:
        fill_open_jobs(store, size, clock.now())
        claims, sweeps = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            claimed = store.claim("bench", limit=BATCH, lease=60)
            claims.append(time.perf_counter() - started)
            for job in claimed:
                store.release(job, "bench", error=None, delay=0, delivery=longcall.Delivery.READY)
                store.release_session(job.session_key, "bench")
            started = time.perf_counter()
            due = store.overdue(500)
            sweeps.append(time.perf_counter() - started)
            assert len(claimed) == BATCH and len(due) == 100, (len(claimed), len(due))
        results.append((size, statistics.median(claims) * 1000, statistics.median(sweeps) * 1000))
    app.close()
    return results


# -- the run --------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "LONGCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    add_prefix_option(parser)
    parser.add_argument("--open", default="10000,1000000", help="open-job counts for latency")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    databases = None if args.skip_postgres else BenchDatabases(args.pg, args.db_prefix)
    try:
        return run(args, databases)
    finally:
        if databases is not None:
            databases.drop_all()


def run(args: argparse.Namespace, databases: BenchDatabases | None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-"))
    configs: list[tuple[str, Callable[[], str], Callable[[str], Any], int]] = []
    for mode in ("FULL", "NORMAL"):

        def sqlite_db(mode: str = mode) -> str:
            path = tmp / f"{uuid.uuid4().hex}.db"
            longcall.App(f"sqlite:///{path}").close()
            return str(path)

        configs.append((f"SQLite {mode}", sqlite_db, lambda p, mode=mode: RawSqlite(p, mode), 1))
    if databases is not None:
        for conns in (1, 8):

            def pg_db() -> str:
                url = databases.fresh("jobs")
                longcall.App(url).close()
                return url

            configs.append((f"PostgreSQL {conns} conn", pg_db, RawPostgres, conns))

    print(f"{'configuration':<20}{'raw jobs/s':>12}{'longcall jobs/s':>17}{'ratio':>8}  target")
    failed = False
    for name, fresh, raw_open, threads in configs:
        raws, ours = [], []
        for _ in range(args.rounds):
            where = fresh()
            now: Callable[[], float | None] = (
                time.time if name.startswith("SQLite") else (lambda: None)
            )
            raws.append(raw_lifecycle(lambda w=where, o=raw_open: o(w), args.jobs, threads, now))
            where = fresh()
            url = (
                f"sqlite:///{where}?synchronous={name.split()[1]}"
                if name.startswith("SQLite")
                else where
            )
            if not name.startswith("SQLite"):
                url = f"{where}?pool_size={threads}"
            ours.append(longcall_lifecycle(url, args.jobs, threads))
        raw, our = statistics.median(raws), statistics.median(ours)
        ratio = our / raw
        failed |= ratio < TARGET
        mark = "ok" if ratio >= TARGET else "BELOW"
        print(f"{name:<20}{raw:>12,.0f}{our:>17,.0f}{ratio:>8.2f}  >= {TARGET} {mark}", flush=True)

    if not args.skip_latency:
        sizes = [int(x) for x in args.open.split(",")]
        targets = [("SQLite FULL", lambda: f"sqlite:///{tmp / 'latency.db'}")]
        if databases is not None:
            targets.append(("PostgreSQL", lambda: databases.fresh("jobs")))
        print(f"\n{'claim/sweep latency':<20}{'open jobs':>12}{'claim ms':>10}{'sweep ms':>10}")
        for name, make in targets:
            rows = latency(make(), sizes)
            for size, claim_ms, sweep_ms in rows:
                print(f"{name:<20}{size:>12,}{claim_ms:>10.2f}{sweep_ms:>10.2f}")
            claim_growth = rows[-1][1] / rows[0][1]
            sweep_growth = rows[-1][2] / rows[0][2]
            ok = claim_growth <= 1.5 and sweep_growth <= 1.5
            failed |= not ok
            print(
                f"{name:<20}{'growth':>12}{claim_growth:>9.2f}x{sweep_growth:>9.2f}x  "
                f"<= 1.5x {'ok' if ok else 'BELOW'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
