"""One resumer or worker in its own process, for the multi-process and crash tests.

Run by path: ``python tests/procs.py --url URL --log FILE [options]``. It builds an
:class:`~longcall.App` on ``URL`` with the same tool and scripted agent the tests seed jobs
with (:func:`build_app`), wraps the agent in a :class:`Recorder` and runs a
:class:`~longcall.jobs.delivery.Deliverer` (``--mode resumer``) or a
:class:`~longcall.worker.Worker` (``--mode worker``, which also stops on SIGTERM) until
``--stop-file`` exists or ``--max-seconds`` pass.

The recorder appends one tab-separated line per fact to ``--log`` (``O_APPEND``, one
``write`` per line, so processes can share a file):

=========  ==========================================================================
ready      pid                             the app is built; waiting for ``--go-file``
attempt    pid session call status         the resumer asked the agent to take a response
delivered  pid session call status         the agent stored that response (it was new)
overlap    pid session                     another run held the session's file lock
run        pid session start end           one agent run, ``time.time()`` at both ends
paused     pid session where               the run stopped to wait (``--pause-at``)
stats      pid json                        the resumer's counters, written on a clean exit
=========  ==========================================================================

``overlap`` comes from a non-blocking ``flock`` on ``--locks/<session>.lock`` taken for the
whole run: two runs on one session at the same time, in any processes, cannot both get it.
Each ``attempt`` line ends with the run's start time (``time.time()``), which names the run.

With ``--agent-store URL`` the function responses go not into the scripted agent's session
table (whose unique index would refuse a second closing response and so hide it) but into
:class:`AgentStore`'s plain table on another database, one row per write, which the
``has_function_response`` check reads too: a doubled delivery is a second row there.

The tests import this module too, for :func:`build_app`, :func:`seed`, :func:`read_log`,
:class:`Proc` and the database helpers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from longcall import App, FenceLost, Rule, ScriptedAgent
from longcall.agents import AgentEvent, Fence, FunctionResponse, Message
from longcall.core.clock import Clock
from longcall.testing.scripted import FINAL_STATUSES
from longcall.testing.transcripts import Transcripts

HERE = Path(__file__).resolve()
TOOL = "report"
PARALLEL = 3  # calls the "reports" rule makes in one invocation


# -- the app every process builds --------------------------------------------------------


def build_app(
    url: str,
    *,
    clock: Clock | None = None,
    think: Callable[[], Awaitable[None]] | None = None,
    **options: Any,
) -> tuple[App, ScriptedAgent]:
    """The App with the ``report`` tool, and a scripted agent that calls it.

    "one report" makes one call; "reports" makes :data:`PARALLEL` calls in one invocation.
    """
    app = App(url, clock=clock, **options)

    @app.long_running(name=TOOL)
    def report(topic: str) -> str:
        """Writes a report on a topic."""
        return f"The report on {topic} has started."

    rules = [
        Rule(r"one report", calls=[(TOOL, {"topic": "one"})]),
        Rule(r"reports", calls=[(TOOL, {"topic": f"part {i}"}) for i in range(PARALLEL)]),
    ]
    return app, ScriptedAgent(app, rules=rules, think=think)


async def seed(
    app: App, agent: ScriptedAgent, *, sessions: int, turns: int, text: str = "reports"
) -> list[str]:
    """Run ``turns`` user turns on each of ``sessions`` sessions and complete every job.

    Returns the ids of the jobs, which are all ready for delivery afterwards.
    """
    for s in range(sessions):
        for t in range(turns):
            await app.run_turn_async(agent, user_id="u", session_id=f"s{s:03d}", text=f"{text} {t}")
    jobs = await app.list_jobs_async(limit=1_000_000)
    for job in jobs:
        outcome = await app.complete_async(job.job_id, {"pages": 3})
        assert outcome.changed
    return [job.job_id for job in jobs]


def final_responses(app: App) -> Counter[str]:
    """How many closing function responses each call has in the scripted agent's sessions."""
    counts: Counter[str] = Counter()
    for job in app.list_jobs(limit=1_000_000):
        if job.session_id is None:
            continue
        for event in Transcripts(app.store).events(job.session_id):
            if event.author != "user":
                continue
            for response in event.content.get("functionResponses", ()):
                if response["id"] == job.call_id and (
                    response["response"].get("status") in FINAL_STATUSES
                ):
                    counts[response["id"]] += 1
    return counts


# -- an agent's session store without a unique index ------------------------------------


class AgentStore:
    """The agent's own record of the function responses it took, on PostgreSQL.

    One row per write and no unique index per call, so that a doubled delivery is counted
    rather than refused. :meth:`write_response` is the only write. It lives in longcall's
    own database and honours the delivery's fencing token there: the write and the check that
    its holder still holds the session under that token are one transaction, with the lease
    row share-locked so no take can slip between them (as the scripted agent does). The
    process keeps one connection open (as an agent's session service would): a write caught
    by a partition hangs on it and, healed, arrives late rather than failing.
    """

    SCHEMA = """
        CREATE TABLE IF NOT EXISTS agent_responses (
            session_id  TEXT NOT NULL,
            call_id     TEXT NOT NULL,
            status      TEXT NOT NULL,
            pid         INTEGER NOT NULL,
            run_start   DOUBLE PRECISION NOT NULL,
            fence       BIGINT,
            written_at  DOUBLE PRECISION NOT NULL
                        DEFAULT extract(epoch FROM clock_timestamp())
        )"""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        self._lock = threading.Lock()

    @classmethod
    def create(cls, url: str) -> None:
        """Make the table (the test does, before any process writes)."""
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(cls.SCHEMA)

    def write_response(
        self,
        session_id: str,
        response: FunctionResponse,
        *,
        run_start: float,
        fence: Fence | None = None,
    ) -> None:
        """Store one function response. ``written_at`` is the database's clock as the row
        is written, so a write held up by a partition shows when it really landed.

        With a ``fence``, nothing is written (:class:`~longcall.FenceLost`) unless its
        holder still holds the session's lease under its token, checked in this transaction."""
        with self._lock, self._conn.transaction():
            if fence is not None:
                held = self._conn.execute(
                    "SELECT 1 FROM lc_session_leases WHERE app_name = %s AND user_id = %s"
                    " AND session_id = %s AND holder = %s AND fence = %s"
                    " AND expires_at > lc_now(NULL) FOR SHARE",
                    (
                        fence.session.app_name,
                        fence.session.user_id,
                        fence.session.session_id,
                        fence.holder,
                        fence.token,
                    ),
                ).fetchone()
                if held is None:
                    raise FenceLost(session_id, fence.holder, fence.token)
            self._conn.execute(
                "INSERT INTO agent_responses (session_id, call_id, status, pid, run_start, fence)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    session_id,
                    response.id,
                    response.response["status"],
                    os.getpid(),
                    run_start,
                    None if fence is None else fence.token,
                ),
            )

    def has_response(self, session_id: str, call_id: str) -> bool:
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM agent_responses WHERE session_id = %s AND call_id = %s"
                " AND status = ANY(%s)",
                (session_id, call_id, list(FINAL_STATUSES)),
            ).fetchone()
        return row is not None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def agent_store_rows(url: str) -> list[dict[str, Any]]:
    """Every row :class:`AgentStore` wrote, oldest first."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, connect_timeout=10, row_factory=dict_row) as conn:
        return list(conn.execute("SELECT * FROM agent_responses ORDER BY written_at").fetchall())


# -- the recording runner ----------------------------------------------------------------


class LogFile:
    """Appends whole lines with one ``write`` each, so processes can share the file."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, kind: str, *fields: object) -> None:
        line = "\t".join([kind, str(os.getpid()), *(str(f) for f in fields)]) + "\n"
        os.write(self.fd, line.encode())

    def close(self) -> None:
        os.close(self.fd)


class Recorder:
    """An AgentRunner around the scripted agent that logs, locks and pauses its runs."""

    def __init__(
        self,
        inner: ScriptedAgent,
        log: LogFile,
        *,
        locks: Path | None = None,
        pause_before: Callable[[str], Awaitable[None]] | None = None,
        agent_store: AgentStore | None = None,
        think: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = inner
        self.app_name = inner.app_name
        self.log = log
        self.locks = locks
        self.pause_before = pause_before
        self.agent_store = agent_store
        self.think = think  # before an agent_store delivery's write (the model's reply)

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        if self.agent_store is not None:
            return await asyncio.to_thread(self.agent_store.has_response, session_id, call_id)
        return await self.inner.has_function_response(
            user_id=user_id, session_id=session_id, call_id=call_id
        )

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        fd = None
        if self.locks is not None:
            fd = os.open(self.locks / f"{session_id}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.log.write("overlap", session_id)
        start = time.time()
        try:
            for response in message.function_responses:
                self.log.write(
                    "attempt", session_id, response.id, response.response["status"], f"{start:.6f}"
                )
            if self.pause_before is not None:
                await self.pause_before(session_id)
            if self.agent_store is not None and message.function_responses:
                async for event in self._into_agent_store(session_id, message, start):
                    yield event
                return
            async for event in self.inner.run(
                user_id=user_id, session_id=session_id, message=message
            ):
                if event.author == "user":
                    for response in event.function_responses:
                        self.log.write(
                            "delivered", session_id, response.id, response.response["status"]
                        )
                yield event
        finally:
            self.log.write("run", session_id, f"{start:.6f}", f"{time.time():.6f}")
            if fd is not None:
                os.close(fd)  # releases the flock

    async def _into_agent_store(
        self, session_id: str, message: Message, start: float
    ) -> AsyncIterator[AgentEvent]:
        assert self.agent_store is not None
        if self.think is not None:
            await self.think()
        for response in message.function_responses:
            await asyncio.to_thread(
                self.agent_store.write_response,
                session_id,
                response,
                run_start=start,
                fence=message.fence,
            )
            self.log.write("delivered", session_id, response.id, response.response["status"])
            yield AgentEvent(author="user", invocation_id="", function_responses=(response,))


# -- the process -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--url", required=True)
    p.add_argument("--log", required=True, type=Path)
    p.add_argument("--mode", choices=("resumer", "worker"), default="resumer")
    p.add_argument("--locks", type=Path, default=None)
    p.add_argument("--go-file", type=Path, default=None)
    p.add_argument("--stop-file", type=Path, default=None)
    p.add_argument("--max-seconds", type=float, default=120.0)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--deliveries", type=int, default=16, help="sessions delivered to at once")
    p.add_argument("--agent-store", default=None, help="URL of the AgentStore's database")
    p.add_argument("--poll", type=float, default=0.1)
    p.add_argument("--drain", type=float, default=30.0)
    p.add_argument("--think", type=float, default=0.0, help="seconds each model reply takes")
    p.add_argument("--pause-at", choices=("before", "after"), default=None)
    p.add_argument("--pause", type=float, default=3600.0)
    p.add_argument("--signal-file", type=Path, default=None)
    return p


async def _watch(stop: Callable[[], None], stop_file: Path | None, max_seconds: float) -> None:
    give_up = time.monotonic() + max_seconds
    while time.monotonic() < give_up:
        if stop_file is not None and await asyncio.to_thread(stop_file.exists):
            break
        await asyncio.sleep(0.05)
    stop()


async def _run(args: argparse.Namespace, log: LogFile) -> Counter[str]:
    async def pause(session_id: str, where: str) -> None:
        log.write("paused", session_id, where)
        if args.signal_file is not None:
            await asyncio.to_thread(args.signal_file.write_text, str(os.getpid()))
        await asyncio.sleep(args.pause)

    async def think() -> None:
        if args.think:
            await asyncio.sleep(args.think)
        if args.pause_at == "after":
            await pause("-", "after")

    async def pause_before(session_id: str) -> None:
        await pause(session_id, "before")

    app, agent = build_app(args.url, think=think)
    agent_store = AgentStore(args.agent_store) if args.agent_store else None
    try:
        recorder = Recorder(
            agent,
            log,
            locks=args.locks,
            pause_before=pause_before if args.pause_at == "before" else None,
            agent_store=agent_store,
            think=think,
        )
        log.write("ready")
        if args.go_file is not None:
            await asyncio.to_thread(wait_for, args.go_file.exists, args.max_seconds, "go", 0.01)
        options: dict[str, Any] = {
            "lease": args.lease,
            "batch": args.batch,
            "poll_interval": args.poll,
            "deliveries": args.deliveries,
        }
        if args.mode == "resumer":
            resumer = app.deliverer(recorder, **options)
            stop = asyncio.Event()
            watcher = asyncio.create_task(_watch(stop.set, args.stop_file, args.max_seconds))
            await resumer.run(stop)
            watcher.cancel()
            return resumer.stats
        worker = app.worker(
            recorder,
            drain_timeout=args.drain,
            sweep_interval=0.5,
            dispatch_interval=0.5,
            **options,
        )
        watcher = asyncio.create_task(_watch(worker.stop, args.stop_file, args.max_seconds))
        await worker.run()
        watcher.cancel()
        return worker.deliverer.stats
    finally:
        if agent_store is not None:
            await asyncio.to_thread(agent_store.close)
        await asyncio.to_thread(app.close)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format=f"%(asctime)s {os.getpid()} %(levelname)s %(name)s: %(message)s",
    )
    log = LogFile(args.log)
    try:
        stats = asyncio.run(_run(args, log))
        log.write("stats", json.dumps(dict(stats), sort_keys=True))
    finally:
        log.close()
    return 0


# -- helpers for the tests ---------------------------------------------------------------


def read_log(*paths: Path) -> list[list[str]]:
    """Every line of the logs, split into fields (kind, pid, …)."""
    lines = []
    for path in paths:
        if path.exists():
            lines.extend(ln.split("\t") for ln in path.read_text().splitlines() if ln)
    return lines


def log_kind(lines: list[list[str]], kind: str) -> list[list[str]]:
    return [ln for ln in lines if ln[0] == kind]


def overlapping_runs(lines: list[list[str]]) -> list[tuple[str, tuple[float, float], str]]:
    """Runs that started on a session before an earlier run on it had ended."""
    by_session: dict[str, list[tuple[float, float, str]]] = {}
    for _, pid, session, start, end in log_kind(lines, "run"):
        by_session.setdefault(session, []).append((float(start), float(end), pid))
    found = []
    for session, runs in by_session.items():
        runs.sort()
        latest_end = float("-inf")
        for start, end, pid in runs:
            if start < latest_end:
                found.append((session, (start, latest_end), pid))
            latest_end = max(latest_end, end)
    return found


class Proc:
    """A ``procs.py`` subprocess; always :meth:`reap` it (in a ``finally``)."""

    def __init__(
        self, url: str, log: Path, *args: str, wrap: Callable[[list[str]], list[str]] = list
    ) -> None:
        """``wrap`` turns the command into the one to run (say, inside a network namespace)."""
        self.log = log
        self.stderr_path = log.with_suffix(f".{time.monotonic_ns()}.err")
        self._stderr = self.stderr_path.open("wb")
        self.popen = subprocess.Popen(
            wrap([sys.executable, str(HERE), "--url", url, "--log", str(log), *args]),
            stdin=subprocess.DEVNULL,
            stdout=self._stderr,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def reap(self) -> None:
        """Kill the process if it still runs and wait for it."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        self._stderr.close()


@contextlib.contextmanager
def procs(started: list[Proc]) -> Iterator[list[Proc]]:
    """Reap every process in ``started`` (which the block may extend) on the way out."""
    try:
        yield started
    finally:
        for proc in started:
            proc.reap()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    """Poll ``predicate`` until true; fail the test naming ``what`` after ``timeout``."""
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_healthy(base: str, seconds: float = 20) -> None:
    """Poll a longcall server's /healthz until it answers 200."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "longcall serve did not come up"
        time.sleep(0.05)


def sql_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """Run one read-only query on either database, outside longcall."""
    if url.startswith("sqlite:"):
        path = urlsplit(url).path[1:]
        conn = sqlite3.connect(path, timeout=10)
        try:
            return list(conn.execute(query).fetchall())
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as pg:
        return [tuple(r) for r in pg.execute(query).fetchall()]


def leftovers(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Session leases still held, and jobs claimed but neither delivered nor given back."""
    leases = sql_rows(
        url, "SELECT session_id, holder, kind FROM lc_session_leases WHERE holder <> ''"
    )
    claimed = sql_rows(
        url,
        "SELECT job_id, delivery, claim_holder FROM lc_jobs WHERE claim_holder IS NOT NULL",
    )
    return leases, claimed


def stats_of(lines: list[list[str]]) -> dict[str, Counter[str]]:
    """Each cleanly exited process's resumer counters, by pid."""
    return {pid: Counter(json.loads(data)) for _, pid, data in log_kind(lines, "stats")}


def tracebacks(text: str) -> list[str]:
    """The tracebacks a process printed (none is expected)."""
    return re.findall(r"Traceback \(most recent call last\):.*?(?=\n\S|\Z)", text, re.S)


if __name__ == "__main__":
    sys.exit(main())
