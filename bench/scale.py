"""Every request the server answers, timed with a small jobs table and with a large one.

Run:  python bench/scale.py                  (SQLite and PostgreSQL, 10,000 then 1,000,000 jobs)
      python bench/scale.py --quick          (2,000 then 100,000 jobs: a smoke run)
      python bench/scale.py --skip-postgres --sizes 10000,1000000 --samples 50
      python bench/scale.py --pg postgresql://postgres@127.0.0.1:5432/postgres --db-prefix mine

For each backend and each size there is a store of its own (SQLite files; fresh PostgreSQL
databases beside ``--pg``, dropped at the end), made by ``longcall.App`` (which migrates). An
admin token and a user's token come from ``app.access``, and that user's three jobs are made
through ``POST /v1/jobs`` (one completed, one failed, one left started). The rest of the table
is bulk-loaded with one plain ``INSERT ... SELECT`` into ``lc_jobs`` (so any trigger the schema
has fires, and whatever the store derives from the table stays right), then analyzed (and on
PostgreSQL vacuumed, as autovacuum would have by then; the job counts folded, as the worker's
sweeper does every few seconds). The smaller table's bulk rows are the
larger's first ones.

The rows look like the ones the API makes: 20 tools; sessions of 20 jobs each (95% of jobs
are in a session), five sessions to a user, so 1,000,000 jobs are 50,000 sessions of 10,000
users; created over 30 days; 1% started, 7% failed, 1% expired, 1% cancelled, the rest
succeeded; a finished job in a session delivered (1% of deliveries failed, 0.2% orphaned).
The larger table has more sessions and users, not bigger ones: the session, the user and the
search text a request names have the same jobs at both sizes, and the other listings fill
their page of 100 at both, so each answer is the same size at both. (``state=succeeded`` is
the finished-jobs filter: the API has no state named ``completed``.)

The server is ``longcall serve`` (uvicorn, the API and the dashboard, no worker loops) in a
process of its own per store, started after its load so that it plans its queries against
the table it serves. The client is ``http.client`` over one keep-alive connection per server.
Each request's answer is checked first (its status, and the number of jobs against a
``COUNT`` over ``lc_jobs``; the ``/metrics`` job counts against a ``GROUP BY`` over it), then
it is sent a few times to warm up, then timed ``--samples`` times, alternating between the
two sizes so that load from elsewhere on the machine falls on both alike; the table shows
the medians. An event stream is timed to its response head (the headers), on a fresh
connection (connected before the clock starts) that is closed at once.

PASS when the larger table's median is at most 1.5x the smaller's; exits 1 on any MISS or
on a wrong answer.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import longcall
from pg_databases import BenchDatabases, add_prefix_option
from served import Server

RATIO_TARGET = 1.5
DAY = 86400.0
USER = "bench-user"  # the user whose token lists exactly their own three jobs
NEEDLE = "quokka"  # search text: in five bulk rows and one of the user's jobs, nowhere else
NEEDLE_ROWS = (7, 401, 809, 1213, 1597)  # bulk rows whose args carry it
JOBS_PER_SESSION = 20
SESSIONS_PER_USER = 5
MEASURED_SESSION = "sess-42"  # bulk rows 840..859
MEASURED_USER = "user-7"  # sessions 35..39: bulk rows 700..799
MEASURED_TOOL = "export_orders"
SMALLEST = 2000  # the rows above must be in the first load
TOOLS = (
    "export_orders",
    "send_invoice",
    "render_report",
    "transcode_video",
    "crawl_site",
    "train_model",
    "approve_refund",
    "book_shipment",
    "translate_document",
    "ocr_scan",
    "sync_crm",
    "run_backtest",
    "generate_images",
    "index_repository",
    "summarize_calls",
    "check_compliance",
    "provision_vm",
    "migrate_mailbox",
    "reconcile_ledger",
    "ask_human",
)
REGIONS = ("emea", "amer", "apac", "latam")


# -- loading the table ------------------------------------------------------------------


def _case(expr: str, names: tuple[str, ...]) -> str:
    """SQL picking ``names[expr]``."""
    whens = " ".join(f"WHEN {i} THEN '{name}'" for i, name in enumerate(names))
    return f"CASE {expr} {whens} END"


def insert_sql(dialect: str, first: int, last: int, t0: float) -> str:
    """One ``INSERT ... SELECT`` adding bulk rows ``first`` .. ``last`` (inclusive).

    Written once for both dialects: integer arithmetic on the row number gives every column
    (each ``||`` operand parenthesized: SQLite binds ``||`` tighter than ``*`` and ``%``).
    """
    if dialect == "sqlite":
        series = (
            f"RECURSIVE n(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM n WHERE i < {last})"
        )
        job_id = "'job-' || lower(hex(randomblob(16)))"

        def jsonb(text: str) -> str:
            return text

    else:
        series = f"n AS (SELECT i FROM generate_series({first}::bigint, {last}) AS g(i))"
        job_id = "'job-' || md5('scale-' || i)"

        def jsonb(text: str) -> str:
            return f"CAST({text} AS jsonb)"

    needle = ", ".join(str(i) for i in NEEDLE_ROWS)
    args = (
        '\'{"order":"ord-\' || (i) || \'","rows":\' || ((i * 31) % 5000) || '
        f"',\"region\":\"' || ({_case('((i * 13) % 4)', REGIONS)}) || '\"' || "
        f"(CASE WHEN i IN ({needle}) THEN ',\"note\":\"{NEEDLE}\"' ELSE '' END) || '}}'"
    )
    result = (
        "CASE st WHEN 'started' THEN NULL "
        "WHEN 'succeeded' THEN '{\"rows\":' || ((i * 31) % 5000) || ',\"ok\":true}' "
        "WHEN 'failed' THEN '{\"error\":\"upstream answered 503\"}' "
        "WHEN 'expired' THEN '{\"error\":\"the deadline passed\"}' "
        'ELSE \'{"message":"cancelled by the user"}\' END'
    )
    return f"""
WITH {series},
picked AS (
    SELECT i,
           CASE WHEN ((i * 2654435761) % 1000003) % 1000 < 10 THEN 'started'
                WHEN ((i * 2654435761) % 1000003) % 1000 < 80 THEN 'failed'
                WHEN ((i * 2654435761) % 1000003) % 1000 < 90 THEN 'expired'
                WHEN ((i * 2654435761) % 1000003) % 1000 < 100 THEN 'cancelled'
                ELSE 'succeeded' END AS st,
           ((i * 7919) % 100) >= 5 AS in_session,
           ((i * 104729) % 1000) AS dv,
           {t0!r} + ((i * 2246822519) % 2592000000) / 1000.0 AS created,
           1 + ((i * 97) % 3600) AS took
    FROM n
),
shaped AS (
    SELECT picked.*,
           CASE WHEN st = 'started' THEN 'none'
                WHEN NOT in_session THEN 'none'
                WHEN dv < 10 THEN 'failed'
                WHEN dv < 12 THEN 'orphaned'
                ELSE 'delivered' END AS dl
    FROM picked
)
INSERT INTO lc_jobs (
    job_id, tool_name, args, app_name, user_id, session_id, call_id, invocation_id,
    state, result, event_seq, deadline_at, created_at, updated_at, finished_at,
    delivered_at, delivery, attempts, last_error, attached_at, cancel_hook
)
SELECT
    {job_id},
    {_case("((i * 40503) % 20)", TOOLS)},
    {jsonb(args)},
    CASE WHEN in_session THEN 'assistant' END,
    'user-' || (i / {JOBS_PER_SESSION * SESSIONS_PER_USER}),
    CASE WHEN in_session THEN 'sess-' || (i / {JOBS_PER_SESSION}) END,
    CASE WHEN in_session THEN 'call-' || (i) END,
    CASE WHEN in_session THEN 'inv-' || (i / 4) END,
    st,
    {jsonb(result)},
    CASE WHEN st = 'started' THEN 0 ELSE 1 END,
    CASE WHEN st = 'started' THEN created + 40 * {DAY} END,
    created,
    CASE WHEN st = 'started' THEN created
         WHEN dl = 'delivered' THEN created + took + 0.5
         ELSE created + took END,
    CASE WHEN st = 'started' THEN NULL ELSE created + took END,
    CASE WHEN dl = 'delivered' THEN created + took + 0.5 END,
    dl,
    CASE WHEN dl = 'failed' THEN 5 WHEN dl = 'delivered' THEN 1 ELSE 0 END,
    CASE WHEN dl = 'failed' THEN 'the agent raised RuntimeError: model overloaded' END,
    CASE WHEN in_session THEN created END,
    FALSE
FROM shaped
"""


@dataclass
class Backend:
    """One database: how to reach it with longcall and with its own driver."""

    name: str
    url: str
    dialect: str
    path: Path | None = None  # SQLite's file

    @contextlib.contextmanager
    def connect(self) -> Iterator[Any]:
        """A driver connection in autocommit mode."""
        if self.path is not None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            conn.execute("PRAGMA busy_timeout = 30000")
            try:
                yield conn
            finally:
                conn.close()
        else:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as pg:
                yield pg

    def scalar(self, sql: str) -> Any:
        with self.connect() as conn:
            return conn.execute(sql).fetchone()[0]

    def load(self, first: int, last: int, t0: float) -> None:
        """Add bulk rows ``first`` .. ``last`` in one transaction, do the upkeep a running
        deployment has done by then (the worker's sweeper folds the job counts every few
        seconds; autovacuum), then refresh statistics."""
        sql = insert_sql(self.dialect, first, last, t0)
        with self.connect() as conn:
            if self.path is not None:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(sql)
                conn.execute("COMMIT")
            else:
                conn.execute(sql)
        with longcall.App(self.url) as app:
            app.monitor.job_counts()
        with self.connect() as conn:
            if self.path is not None:
                conn.execute("ANALYZE")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                conn.execute("VACUUM (ANALYZE)")

    def args_text(self) -> str:
        return "args" if self.path is not None else "args::text"


# -- the server and the client ----------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


class Client:
    """One keep-alive connection to the server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None = None
    ) -> tuple[float, Answer]:
        """The seconds from sending the request to having the whole answer, and the answer.

        A connection the server closed while idle is opened again, and the clock restarted.
        """
        for attempt in range(2):
            try:
                started = time.perf_counter()
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                took = time.perf_counter() - started
                return took, Answer(response.status, response.headers, data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def stream_head(self, path: str, headers: dict[str, str]) -> tuple[float, Answer]:
        """The seconds from sending the request to having the response head, on a connection
        of its own (connected before the clock starts), which is closed at once."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.connect()
        try:
            started = time.perf_counter()
            conn.request("GET", path, headers={"accept": "text/event-stream", **headers})
            response = conn.getresponse()
            took = time.perf_counter() - started
            return took, Answer(response.status, response.headers, b"")
        finally:
            conn.close()
            time.sleep(0.02)  # the server ends the stream before the next one opens

    def login(self, token: str) -> str:
        """The dashboard's login cookie for ``token``, from its login form."""
        body = urlencode({"token": token}).encode()
        headers = {"content-type": "application/x-www-form-urlencoded"}
        _, answer = self.send("POST", "/login", headers, body)
        found = re.search(r"longcall_login=([^;]+)", answer.headers.get("set-cookie", ""))
        if answer.status != 303 or found is None:
            raise SystemExit(f"logging in to the dashboard answered {answer.status}")
        return f"longcall_login={found.group(1)}"

    def close(self) -> None:
        self.conn.close()


# -- the requests -----------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One request to time, and how to tell its answer is right."""

    name: str
    path: str
    who: str  # "admin", "user" or "" (no credentials)
    kind: str = "list"  # list (JSON jobs), search, page (dashboard HTML), metrics, stream
    where: str | None = None  # the rows it should find, as SQL over lc_jobs ({args}: as text)


def probes() -> list[Probe]:
    mine = f"user_id = '{USER}'"
    search = f"{{args}} LIKE '%{NEEDLE}%'"
    jobs = "/v1/jobs?limit=100"
    return [
        Probe("jobs admin", jobs, "admin", where="1 = 1"),
        Probe("jobs user", jobs, "user", where=mine),
        Probe("state=started admin", f"{jobs}&state=started", "admin", where="state = 'started'"),
        Probe(
            "state=succeeded admin",
            f"{jobs}&state=succeeded",
            "admin",
            where="state = 'succeeded'",
        ),
        Probe(
            "tool admin",
            f"{jobs}&tool={MEASURED_TOOL}",
            "admin",
            where=f"tool_name = '{MEASURED_TOOL}'",
        ),
        Probe(
            "session admin",
            f"{jobs}&session={MEASURED_SESSION}",
            "admin",
            where=f"session_id = '{MEASURED_SESSION}'",
        ),
        Probe(
            "user= admin",
            f"{jobs}&user={MEASURED_USER}",
            "admin",
            where=f"user_id = '{MEASURED_USER}'",
        ),
        Probe(
            "state=started user",
            f"{jobs}&state=started",
            "user",
            where=f"{mine} AND state = 'started'",
        ),
        Probe("search admin", f"{jobs}&q={NEEDLE}", "admin", kind="search", where=search),
        Probe(
            "search user",
            f"{jobs}&q={NEEDLE}",
            "user",
            kind="search",
            where=f"{mine} AND {search}",
        ),
        Probe("metrics", "/metrics", "", kind="metrics"),
        Probe("dashboard / admin", "/", "admin", kind="page", where="1 = 1"),
        Probe("dashboard / user", "/", "user", kind="page", where=mine),
        Probe("events head admin", "/v1/events", "admin", kind="stream"),
        Probe("events head user", "/v1/events", "user", kind="stream"),
    ]


@dataclass
class Credentials:
    tokens: dict[str, str]
    cookies: dict[str, str]

    def headers(self, probe: Probe) -> dict[str, str]:
        if not probe.who:
            return {}
        if probe.kind == "page":
            return {"cookie": self.cookies[probe.who]}
        return {"authorization": f"Bearer {self.tokens[probe.who]}"}


def check(probe: Probe, answer: Answer, backend: Backend) -> str | None:
    """What is wrong with ``answer``, or None when it is right."""
    if answer.status != 200:
        return f"answered {answer.status}: {answer.body[:200]!r}"
    expected = None
    if probe.where is not None:
        where = probe.where.format(args=backend.args_text())
        expected = min(100, int(backend.scalar(f"SELECT COUNT(*) FROM lc_jobs WHERE {where}")))
    if probe.kind == "list":
        jobs = json.loads(answer.body)["jobs"]
        if len(jobs) != expected:
            return f"{len(jobs)} jobs listed, {expected} expected"
        if probe.who == "user" and any(j["userId"] != USER for j in jobs):
            return "another user's job listed"
    elif probe.kind == "search":
        # A search page reads a bounded window of the newest jobs (the API's `q`): it is
        # right when it lists only matches, all of them or a `next_cursor` to go on from.
        # That following the cursors finds every match is tests/test_listings.py's to show.
        assert expected is not None
        page = json.loads(answer.body)
        jobs = page["jobs"]
        if any(NEEDLE not in json.dumps(j["args"]) for j in jobs):
            return "a job listed that does not match"
        if probe.who == "user" and any(j["userId"] != USER for j in jobs):
            return "another user's job listed"
        if len(jobs) > expected or (len(jobs) < expected and not page["nextCursor"]):
            return f"{len(jobs)} jobs listed and no next page, {expected} expected"
    elif probe.kind == "page":
        shown = answer.body.count(b"data-job-id=")
        if shown != expected:
            return f"{shown} jobs on the page, {expected} expected"
    elif probe.kind == "metrics":
        counted: dict[tuple[str, str], float] = {}
        for labels, value in re.findall(
            r"^longcall_jobs\{([^}]*)\} (\S+)$", answer.body.decode(), re.MULTILINE
        ):
            named = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            counted[named["state"], named["delivery"]] = float(value)
        with backend.connect() as conn:
            rows = conn.execute(
                "SELECT state, delivery, COUNT(*) FROM lc_jobs GROUP BY state, delivery"
            ).fetchall()
        actual = {(s, d): float(n) for s, d, n in rows}
        reported = {k: v for k, v in counted.items() if v}
        if reported != actual:
            return f"job counts {reported} differ from the table's {actual}"
    elif not answer.headers.get("content-type", "").startswith("text/event-stream"):
        return f"not an event stream: {answer.headers.get('content-type')}"
    return None


def sender(probe: Probe, side: Side) -> Callable[[], tuple[float, Answer]]:
    """A function sending ``probe`` to ``side``: its seconds and its answer."""
    headers = side.credentials.headers(probe)
    client = side.client
    if probe.kind == "stream":
        return lambda: client.stream_head(probe.path, headers)
    return lambda: client.send("GET", probe.path, headers)


# -- the run ----------------------------------------------------------------------------


@dataclass
class Row:
    probe: str
    backend: str
    small: float = 0.0
    large: float = 0.0
    wrong: str = ""


def user_jobs(port: int, token: str) -> None:
    """The user's three jobs, made through the API: one completed, one failed, one started."""
    client = Client(port)
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    made = []
    for n, args in enumerate(
        [{"order": "ord-u1", "note": f"{NEEDLE} audit"}, {"order": "ord-u2"}, {"order": "ord-u3"}]
    ):
        body = {
            "toolName": TOOLS[n],
            "args": args,
            "appName": "assistant",
            "sessionId": "sess-bench",
            "callId": f"call-bench-{n}",
            "invocationId": "inv-bench",
            "deadline": "7d",
        }
        _, answer = client.send("POST", "/v1/jobs", headers, json.dumps(body).encode())
        if answer.status != 201:
            raise SystemExit(f"POST /v1/jobs answered {answer.status}: {answer.body!r}")
        made.append(json.loads(answer.body)["jobId"])
    finish: list[tuple[str, str, dict[str, Any]]] = [
        (made[0], "complete", {"result": {"rows": 12}}),
        (made[1], "fail", {"error": "upstream answered 503"}),
    ]
    for job_id, verb, outcome in finish:
        path = f"/v1/jobs/{job_id}/{verb}"
        _, answer = client.send("POST", path, headers, json.dumps(outcome).encode())
        if answer.status != 200:
            raise SystemExit(f"POST {path} answered {answer.status}: {answer.body!r}")
    client.close()


@dataclass
class Side:
    """One size: its database, its server, and a client logged in to it."""

    backend: Backend
    server: Server
    client: Client
    credentials: Credentials

    def close(self) -> None:
        self.client.close()
        self.server.stop()


def make_side(backend: Backend, size: int, log: Path) -> Side:
    """A store of ``size`` jobs (the user's three through the API, the rest bulk-loaded) and a
    server on it, started after the load."""
    with longcall.App(backend.url) as app:
        _, admin = app.access.create_token(user_id=None, admin=True)
        _, user = app.access.create_token(user_id=USER)
    tokens = {"admin": admin, "user": user}
    server = Server(backend.url, log)
    try:
        user_jobs(server.port, user)
    finally:
        server.stop()
    started = time.perf_counter()
    # Bulk rows are numbered from 0, so the smaller table's rows are the larger's first ones.
    backend.load(0, size - 4, time.time() - 30 * DAY - 2 * 3600.0)
    total = int(backend.scalar("SELECT COUNT(*) FROM lc_jobs"))
    took = time.perf_counter() - started
    print(f"{backend.name}: {total:,} jobs, loaded in {took:.1f} s", flush=True)
    if total != size:
        raise SystemExit(f"{backend.name}: {total} jobs in the table, not {size}")
    server = Server(backend.url, log)
    client = Client(server.port)
    cookies = {who: client.login(token) for who, token in tokens.items()}
    return Side(backend, server, client, Credentials(tokens, cookies))


def measure(name: str, small: Side, large: Side, args: argparse.Namespace) -> list[Row]:
    """Every probe against both sizes: each answer checked, then warm-up sends, then timed
    sends alternating between the sizes (so load from elsewhere on the machine falls on
    both alike)."""
    rows = []
    for probe in probes():
        row = Row(probe.name, name)
        sends = [sender(probe, side) for side in (small, large)]
        for side, send in zip((small, large), sends, strict=True):
            wrong = check(probe, send()[1], side.backend)
            if wrong and not row.wrong:
                row.wrong = f"with {side.backend.name}: {wrong}"
        for _ in range(args.warmup):
            for send in sends:
                send()
        taken: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.samples):
            for times, send in zip(taken, sends, strict=True):
                times.append(send()[0])
        row.small, row.large = (statistics.median(times) for times in taken)
        print(
            f"  {probe.name:<24}{row.small * 1000:>9.2f} ms{row.large * 1000:>9.2f} ms",
            flush=True,
        )
        rows.append(row)
    return rows


def one_backend(
    name: str, backends: list[Backend], sizes: list[int], log: Path, args: argparse.Namespace
) -> list[Row]:
    sides: list[Side] = []
    try:
        for backend, size in zip(backends, sizes, strict=True):
            sides.append(make_side(backend, size, log))
        return measure(name, sides[0], sides[1], args)
    finally:
        for side in sides:
            side.close()


def report(rows: list[Row], sizes: list[int]) -> int:
    """Print the table; 1 when a row misses its target or answered wrong."""
    small, large = (f"ms at {n:,}" for n in sizes)
    print(f"\n{'request':<24}{'backend':<12}{small:>14}{large:>16}{'ratio':>8}")
    failed = 0
    for row in rows:
        ratio = row.large / row.small if row.small else float("inf")
        verdict = "PASS" if ratio <= RATIO_TARGET else "MISS"
        if row.wrong:
            verdict = "WRONG"
        failed += verdict != "PASS"
        line = (
            f"{row.probe:<24}{row.backend:<12}{row.small * 1000:>14.2f}{row.large * 1000:>16.2f}"
            f"{ratio:>7.1f}x  {verdict}"
        )
        print(line if verdict == "PASS" else f"{line}  <<<")
        if row.wrong:
            print(f"    wrong answer {row.wrong}")
    print(
        f"\n{len(rows) - failed} of {len(rows)} PASS (target: at most {RATIO_TARGET}x"
        f" from {sizes[0]:,} to {sizes[1]:,} jobs); {failed} MISS or WRONG"
    )
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000", help="small,large jobs in the table")
    parser.add_argument("--quick", action="store_true", help="sizes 2000,100000")
    parser.add_argument("--samples", type=int, default=30, help="timed sends per request")
    parser.add_argument("--warmup", type=int, default=5, help="untimed sends first")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "LONGCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="the PostgreSQL server's admin URL (a fresh database is made beside it)",
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    add_prefix_option(parser)
    args = parser.parse_args()
    sizes = [2000, 100_000] if args.quick else [int(n) for n in args.sizes.split(",")]
    if len(sizes) != 2 or not SMALLEST <= sizes[0] < sizes[1]:
        parser.error(f"--sizes: two sizes, the first at least {SMALLEST:,}, the second larger")

    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-scale-"))
    log = tmp / "server.log"
    print(f"server output: {log}", flush=True)
    rows: list[Row] = []
    if not args.skip_sqlite:
        paths = [tmp / f"scale-{size}.db" for size in sizes]
        backends = [
            Backend(f"sqlite {size:,}", f"sqlite:///{path}", "sqlite", path)
            for size, path in zip(sizes, paths, strict=True)
        ]
        try:
            rows += one_backend("sqlite", backends, sizes, log, args)
        finally:
            for leftover in tmp.glob("scale-*.db*"):
                leftover.unlink()
    if not args.skip_postgres:
        databases = BenchDatabases(args.pg, args.db_prefix)
        try:
            backends = [
                Backend(f"postgresql {size:,}", databases.fresh(f"scale_{size}"), "postgres")
                for size in sizes
            ]
            rows += one_backend("postgresql", backends, sizes, log, args)
        finally:
            databases.drop_all()
    return report(rows, sizes)


if __name__ == "__main__":
    sys.exit(main())
