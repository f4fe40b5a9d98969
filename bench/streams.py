"""The server's cost of open event streams (``GET /v1/events``): 10, 100 and 1,000 at once.

Run:  python bench/streams.py                    (SQLite and PostgreSQL; 0, 10, 100, 1,000)
      python bench/streams.py --streams 10,1000 --window 10
      python bench/streams.py --skip-sqlite --pg postgresql://postgres@127.0.0.1:5432/postgres

Every open stream shares the server's one look at the store per poll (the change feed,
``longcall.server.change_feed``), so the database should see the same few queries a second
whether 10 or 1,000 streams are open; the server's CPU still grows with the streams, since
each one wakes every poll, picks its jobs from the feed and is sent its messages.

For each backend there is a fresh store (a SQLite file; a fresh PostgreSQL database beside
``--pg``, dropped at the end), an admin token and a user's token from ``app.access``, and one
``longcall serve`` process (the API and the dashboard, no worker loops). The bench raises its
own open-file limit to the hard limit before it starts the server, which inherits it (the
limit the server runs with is printed from ``/proc/<pid>/limits``).

Then, for each number of streams (0 first: the baseline), half with the admin's token and half
with the user's, each phase:

1. opens the streams (raw HTTP/1.1 over ``asyncio.open_connection``, reading chunks, so the
   client costs little), and waits ``--settle`` seconds: PostgreSQL reports an idle
   connection's transactions up to 10 s late, so the burst of opening must be counted first;
2. a *quiet* window (``--quiet`` seconds, no job changes): the server's CPU, and on
   PostgreSQL the database's transactions a second, every one of them the streams' own;
3. a *loaded* window (``--window`` seconds, after 2 s of warm-up): through the API with the
   admin's token, ``--rate`` jobs a second are created and each completed a second later,
   every other one the user's, one request after another (their median and longest time
   are printed: a server slowed by its streams falls behind the rate). CPU and transactions
   again; *net* is the figure less the 0-stream phase's (what the load costs by itself);
4. waits until every stream has received the completed version of every job it may see (the
   admin's: all of them; the user's: the user's, and none of anyone else's), up to 20 s, and
   closes the streams.

Server CPU is ``utime + stime`` of the server process from ``/proc/<pid>/stat``, as % of one
core. Database queries are ``xact_commit + xact_rollback`` of the bench database in
``pg_stat_database`` (``pg_stat_statements`` is used by nothing here: the shared server does
not load it, and the bench does not install it). Each of the server's reads is one
transaction, so the two match. SQLite keeps no such count, and counting statements would
mean changing the server process, so SQLite reports CPU and delivery only.

PASS when on PostgreSQL the quiet queries a second with the most streams are at most 1.5x
those with the fewest (above 0), and the loaded net figure too (with 0.5 q/s of slack, the
net being a difference of two noisy figures). Exits 1 on a MISS, on any stream that missed
a job, saw another user's job, failed to open or ended early.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import longcall
from pg_databases import BenchDatabases, add_prefix_option
from served import Server

RATIO_TARGET = 1.5
SLACK = 0.5  # queries a second the loaded net figure may exceed its target by (noise)
USER = "bench-user"  # the user token's user: every other background job is theirs
OTHER = "bench-other"  # the rest of the background jobs
TICKS = os.sysconf("SC_CLK_TCK")
OPENING = 64  # streams being opened at once
DRAIN = 20.0  # seconds the streams have to catch up once the background load stops

JOB_ID = re.compile(rb'"jobId":"([^"]*)"')
STATE = re.compile(rb'"state":"([^"]*)"')
USER_ID = re.compile(rb'"userId":(?:"([^"]*)"|null)')


def raise_open_files() -> int:
    """Raise this process's open-file limit to its hard limit; children inherit it."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (all its threads) so far."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text.rpartition(")")[2].split()  # fields[0] is the state, field 3 of stat(5)
    return (int(fields[11]) + int(fields[12])) / TICKS


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class Transactions:
    """The bench database's committed and rolled-back transactions, read from the admin
    database (so that reading them adds none)."""

    def __init__(self, admin_url: str, database: str) -> None:
        import psycopg

        self._conn = psycopg.connect(admin_url, autocommit=True)
        self._database = database

    def count(self) -> int:
        row = self._conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (self._database,),
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._conn.close()


# -- the client -------------------------------------------------------------------------


class Api:
    """One keep-alive HTTP/1.1 connection for JSON requests, opened again when the server
    closed it."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def send(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        for attempt in range(2):
            if self._conn is None:
                self._conn = await asyncio.open_connection("127.0.0.1", self.port)
            reader, writer = self._conn
            try:
                writer.write(
                    f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                    f"authorization: Bearer {self.token}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                status = int(head.split(" ", 2)[1])
                length = re.search(r"(?im)^content-length:\s*(\d+)", head)
                answer = await reader.readexactly(int(length.group(1)) if length else 0)
                return status, json.loads(answer) if answer else None
            except (asyncio.IncompleteReadError, ConnectionError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None


@dataclass
class Stream:
    """One open ``GET /v1/events`` and what it received."""

    who: str  # "admin" or "user"
    status: int = 0  # the answer's status (0: not answered yet)
    problem: str = ""  # why it did not open or ended early
    messages: int = 0  # `event: job` messages
    seen: set[str] = field(default_factory=set)  # job ids received at any version
    finished: set[str] = field(default_factory=set)  # job ids received as succeeded
    foreign: set[str] = field(default_factory=set)  # other users' jobs a user's stream got
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.StreamWriter | None = None

    def take(self, message: bytes) -> None:
        if not message.startswith(b"event: job") and b"\nevent: job\n" not in message:
            return
        self.messages += 1
        job_id, state, user = JOB_ID.search(message), STATE.search(message), USER_ID.search(message)
        if job_id is None or state is None or user is None:
            self.problem = self.problem or f"a message without a job: {message[:200]!r}"
            return
        name = job_id.group(1).decode()
        self.seen.add(name)
        if state.group(1) == b"succeeded":
            self.finished.add(name)
        if self.who == "user" and user.group(1) != USER.encode():
            self.foreign.add(name)

    async def follow(self, port: int, token: str, opening: asyncio.Semaphore) -> None:
        """Open the stream and read it until it is closed; a problem is noted, not raised."""
        try:
            async with opening:
                reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
                self.writer.write(
                    f"GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                    f"authorization: Bearer {token}\r\naccept: text/event-stream\r\n\r\n".encode()
                )
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                self.status = int(head.split(" ", 2)[1])
            self.opened.set()
            if self.status != 200 or "chunked" not in head.lower():
                self.problem = f"answered {head.splitlines()[0]!r}"
                return
            buffer = b""
            while True:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    self.problem = "the server ended the stream"
                    return
                buffer += (await reader.readexactly(size + 2))[:-2]
                *messages, buffer = buffer.split(b"\n\n")
                for message in messages:
                    self.take(message)
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            self.problem = self.problem or f"{type(exc).__name__}: {exc}"
        finally:
            self.opened.set()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Load:
    """The background: ``rate`` jobs a second created through the API with the admin's token,
    each completed about a second later; every other job is the user's."""

    def __init__(self, port: int, token: str, prefix: str, rate: float) -> None:
        self.api = Api(port, token)
        self.prefix = prefix
        self.rate = rate
        self.owners: dict[str, str] = {}  # job id -> its user, for jobs completed
        self.errors: list[str] = []
        self.took: list[float] = []  # seconds each request took, answer included
        self.stop = asyncio.Event()

    async def send(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        started = time.perf_counter()
        answer = await self.api.send("POST", path, body)
        self.took.append(time.perf_counter() - started)
        return answer

    async def _complete(self, job_id: str, user: str) -> None:
        status, body = await self.send(f"/v1/jobs/{job_id}/complete", {"result": {"ok": True}})
        if status == 200:
            self.owners[job_id] = user
        else:
            self.errors.append(f"completing {job_id} answered {status}: {body}")

    async def run(self) -> None:
        pending: collections.deque[tuple[str, str]] = collections.deque()
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            await asyncio.sleep(max(0.0, started + n / self.rate - time.monotonic()))
            job_id, user = f"{self.prefix}-{n}", USER if n % 2 == 0 else OTHER
            body = {"toolName": "bench_tool", "jobId": job_id, "userId": user, "args": {"n": n}}
            status, answer = await self.send("/v1/jobs", body)
            if status == 201:
                pending.append((job_id, user))
            else:
                self.errors.append(f"creating {job_id} answered {status}: {answer}")
            if len(pending) > self.rate:
                await self._complete(*pending.popleft())
            n += 1
        while pending:
            await self._complete(*pending.popleft())
        self.api.close()


# -- the phases -------------------------------------------------------------------------


@dataclass
class Window:
    seconds: float = 0.0
    server_cpu: float = 0.0  # % of one core
    client_cpu: float = 0.0
    queries: float | None = None  # transactions a second (None: not counted)


@dataclass
class Phase:
    backend: str
    streams: int
    quiet: Window = field(default_factory=Window)
    loaded: Window = field(default_factory=Window)
    net: float | None = None
    jobs: int = 0  # background jobs created and completed
    job_rate: float = 0.0  # background jobs a second in the loaded window
    latency: tuple[float, float] = (0.0, 0.0)  # background requests: median and max, seconds
    slow: int = 0  # background requests that took over half a second
    messages: int = 0
    missed: int = 0  # (stream, job) pairs whose completed version never arrived
    problems: list[str] = field(default_factory=list)


async def measure(seconds: float, pid: int, counter: Transactions | None) -> Window:
    """The server's CPU and the database's transactions a second over ``seconds``."""
    loop = asyncio.get_running_loop()
    count = (lambda: loop.run_in_executor(None, counter.count)) if counter else None
    q0 = await count() if count else 0
    t0, c0, o0 = time.monotonic(), cpu_seconds(pid), own_cpu_seconds()
    await asyncio.sleep(seconds)
    t1, c1, o1 = time.monotonic(), cpu_seconds(pid), own_cpu_seconds()
    q1 = await count() if count else 0
    took = t1 - t0
    return Window(
        took,
        100 * (c1 - c0) / took,
        100 * (o1 - o0) / took,
        (q1 - q0) / took if count else None,
    )


async def phase(
    backend: str,
    n: int,
    server: Server,
    tokens: dict[str, str],
    counter: Transactions | None,
    args: argparse.Namespace,
) -> Phase:
    result = Phase(backend, n)
    pid = server.proc.pid
    streams = [Stream("admin" if i % 2 == 0 else "user") for i in range(n)]
    opening = asyncio.Semaphore(OPENING)
    started = time.monotonic()
    tasks = [asyncio.create_task(s.follow(server.port, tokens[s.who], opening)) for s in streams]
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(120):
                for s in streams:
                    await s.opened.wait()
        opened = sum(s.status == 200 and not s.problem for s in streams)
        if n:
            print(f"  {n:,} streams: {opened:,} open in {time.monotonic() - started:.1f} s")
        await asyncio.sleep(args.settle if counter else 3.0)
        result.quiet = await measure(args.quiet, pid, counter)

        load = Load(server.port, tokens["admin"], f"{backend}-{n}", args.rate)
        running = asyncio.create_task(load.run())
        await asyncio.sleep(2.0)
        before = len(load.owners)
        result.loaded = await measure(args.window, pid, counter)
        result.job_rate = (len(load.owners) - before) / result.loaded.seconds
        load.stop.set()
        await running
        result.jobs = len(load.owners)
        if load.took:
            result.latency = (statistics.median(load.took), max(load.took))
            result.slow = sum(took > 0.5 for took in load.took)
        result.problems += load.errors
        everyone, users = set(load.owners), {j for j, u in load.owners.items() if u == USER}

        def missing(s: Stream) -> set[str]:
            return (everyone if s.who == "admin" else users) - s.finished

        for _ in range(int(DRAIN / 0.5)):
            if not any(missing(s) for s in streams if s.status == 200):
                break
            await asyncio.sleep(0.5)
        for i, s in enumerate(streams):
            lost = missing(s)
            result.missed += len(lost)
            result.messages += s.messages
            name = f"stream {i} ({s.who})"
            if s.problem:
                result.problems.append(f"{name}: {s.problem}")
            elif lost:
                result.problems.append(f"{name} missed {len(lost)} jobs: {sorted(lost)[:3]}")
            if s.foreign:
                result.problems.append(f"{name} got {len(s.foreign)} other users' jobs")
    finally:
        for s in streams:
            s.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2.0)  # the server ends the closed streams before the next phase
    return result


async def run_backend(
    name: str, url: str, counter: Transactions | None, log: Path, args: argparse.Namespace
) -> list[Phase]:
    with longcall.App(url) as app:
        _, admin = app.access.create_token(user_id=None, admin=True)
        _, user = app.access.create_token(user_id=USER)
    tokens = {"admin": admin, "user": user}
    server = Server(url, log)
    print(f"{name}: server pid {server.proc.pid}, open files {server.open_files_limit()}")
    phases: list[Phase] = []
    try:
        for n in [0, *args.streams]:
            done = await phase(name, n, server, tokens, counter, args)
            if phases:
                base = phases[0].loaded.queries
                if done.loaded.queries is not None and base is not None:
                    done.net = done.loaded.queries - base
            show(done)
            phases.append(done)
    finally:
        server.stop()
    noted = [line for line in server.output() if line.strip()]
    if noted:
        print(f"  the server wrote {len(noted)} lines; the last ones:")
        for line in noted[-20:]:
            print(f"    {line}")
    return phases


def show(p: Phase) -> None:
    def q(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    print(
        f"  {p.streams:>5} streams: cpu quiet {p.quiet.server_cpu:.1f}% loaded "
        f"{p.loaded.server_cpu:.1f}% (bench {p.loaded.client_cpu:.1f}%), queries/s quiet "
        f"{q(p.quiet.queries)} loaded {q(p.loaded.queries)} net {q(p.net)}, "
        f"{p.jobs} jobs ({p.job_rate:.1f}/s; requests {p.latency[0] * 1000:.0f} ms median, "
        f"{p.latency[1] * 1000:.0f} ms max, {p.slow} over 500 ms), {p.messages:,} messages, "
        f"{p.missed} missed",
        flush=True,
    )
    for problem in p.problems[:10]:
        print(f"      {problem}")
    if len(p.problems) > 10:
        print(f"      ... {len(p.problems) - 10} more")


def report(phases: list[Phase]) -> int:
    """Print the table and the verdict; 1 on a MISS or any stream problem."""

    def q(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    print(
        f"\n{'backend':<12}{'streams':>8}{'cpu quiet %':>13}{'cpu loaded %':>14}"
        f"{'q/s quiet':>11}{'q/s loaded':>12}{'q/s net':>9}{'messages':>10}{'missed':>8}"
        f"{'problems':>10}"
    )
    for p in phases:
        print(
            f"{p.backend:<12}{p.streams:>8,}{p.quiet.server_cpu:>13.1f}{p.loaded.server_cpu:>14.1f}"
            f"{q(p.quiet.queries):>11}{q(p.loaded.queries):>12}{q(p.net):>9}"
            f"{p.messages:>10,}{p.missed:>8}{len(p.problems):>10}"
        )
    failed = sum(bool(p.missed or p.problems) for p in phases)
    print()
    for backend in dict.fromkeys(p.backend for p in phases):
        mine = [p for p in phases if p.backend == backend]
        if len(mine) < 3:
            continue
        base, low, top = mine[0], mine[1], mine[-1]
        per_loaded = (top.loaded.server_cpu - base.loaded.server_cpu) / top.streams
        per_quiet = (top.quiet.server_cpu - base.quiet.server_cpu) / top.streams
        print(
            f"{backend}: server CPU per open stream ({top.streams:,} streams less 0): "
            f"loaded {per_loaded:.3f}%, quiet {per_quiet:.3f}% of a core"
        )
        if low.quiet.queries is None or top.quiet.queries is None:
            continue
        for label, small, large, slack in (
            ("quiet q/s", low.quiet.queries, top.quiet.queries, 0.0),
            ("loaded net q/s", low.net or 0.0, top.net or 0.0, SLACK),
        ):
            ok = large <= RATIO_TARGET * max(small, 0.0) + slack
            ratio = large / small if small > 0 else float("inf")
            verdict = "PASS" if ok else "MISS"
            failed += not ok
            print(
                f"{backend}: {label} {low.streams:,} streams {small:.1f}, {top.streams:,} "
                f"streams {large:.1f} ({ratio:.2f}x, target {RATIO_TARGET}x"
                f"{f' + {slack}' if slack else ''})  {verdict}"
            )
    print(f"\n{'FAIL' if failed else 'PASS'}: {failed} MISS or phases with stream problems")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="10,100,1000", help="open streams per phase")
    parser.add_argument("--rate", type=float, default=5.0, help="background jobs a second")
    parser.add_argument("--window", type=float, default=15.0, help="loaded window, seconds")
    parser.add_argument("--quiet", type=float, default=8.0, help="quiet window, seconds")
    parser.add_argument(
        "--settle", type=float, default=11.0, help="seconds after opening (PostgreSQL)"
    )
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
    args.streams = sorted(int(n) for n in args.streams.split(","))
    if not args.streams or args.streams[0] < 2:
        parser.error("--streams: at least one phase, each of 2 streams or more")

    limit = raise_open_files()
    if limit < 2 * args.streams[-1] + 100:
        parser.error(f"the open-file hard limit is {limit}: too low for {args.streams[-1]}")
    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-streams-"))
    log = tmp / "server.log"
    print(f"server output: {log}", flush=True)
    phases: list[Phase] = []
    if not args.skip_sqlite:
        url = f"sqlite:///{tmp / 'streams.db'}"
        try:
            phases += asyncio.run(run_backend("sqlite", url, None, log, args))
        finally:
            for leftover in tmp.glob("streams.db*"):
                leftover.unlink()
    if not args.skip_postgres:
        databases = BenchDatabases(args.pg, args.db_prefix)
        try:
            url = databases.fresh("streams")
            counter = Transactions(args.pg, url.rpartition("/")[2])
            try:
                phases += asyncio.run(run_backend("postgresql", url, counter, log, args))
            finally:
                counter.close()
        finally:
            databases.drop_all()
    return report(phases)


if __name__ == "__main__":
    sys.exit(main())
