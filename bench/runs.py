"""Background runs on PostgreSQL: longcall's run workers against procrastinate and DBOS's queue.

Run:  pip install -e '.[postgres]' --group bench
      python bench/runs.py                            (2,000 runs, 4 workers, 3 rounds)
      python bench/runs.py --runs 5000 --rounds 5 --probes 100
      python bench/runs.py --pg postgresql://postgres@127.0.0.1:5432/postgres
      python bench/runs.py --only longcall            (one library, nothing judged)
      python bench/runs.py --only raw                 (the raw baseline alone)

Each library gets, every round, a fresh database (bench_runs_longcall,
bench_runs_procrastinate, bench_runs_dbos, bench_runs_raw, created beside ``--pg`` and
dropped at the end)
and its own worker processes, started one after another, idle until all are up, then warmed
with 8 runs. Then two timed batches of ``--runs`` one-task runs, each submitted *serially* by
the parent (one call and one transaction each, for every library: no batch API, so the
submits stay comparable), each timed end to end, from the first submit to the moment the
parent sees the last run finished (it polls a count of finished rows every 10 ms on a
connection of its own):

- live    the workers run while the parent submits, as they would in production: a run
          starts as soon as it is queued.
- phased  the workers are held (SIGSTOP) while the parent submits and let go (SIGCONT)
          together, so the two phases do not share the two cores: the submits alone and the
          work alone are printed from this batch.

The 2x target is judged in both shapes, each against the faster procrastinate shape in it.
longcall also runs in procrastinate's 1 x 4 shape (one worker process, 4 at a time), not
judged: its ratio to procrastinate 1 x 4 compares the two libraries in one shape, and its rate
beside longcall's 4 x 4 says what the extra worker processes cost on this machine.

- longcall       ``app.submit_run("one", i)``; a workflow ``one(i)`` that calls one task
                 ``noop(i)`` (its checkpoint committed), then ends. 4 worker processes, each
                 ``app.run_worker(concurrency=4)``, woken by LISTEN/NOTIFY.
- procrastinate  ``noop.defer(i=i)`` (its sync connector); an async no-op task; workers
                 woken by LISTEN/NOTIFY. Two shapes: 4 worker processes with concurrency 4
                 (longcall's), and one worker with concurrency 4 (the issue's ~300 jobs/s).
                 The 2x target is judged against the faster of the two.
- DBOS           ``DBOSClient.enqueue`` onto a queue; a workflow ``one(i)`` calling one
                 step. 4 processes share the queue, DBOS's defaults: no per-process limit
                 (with ``worker_concurrency`` a process holds at most that many and takes
                 more only at its next poll) and a poll a second; a poll takes every queued
                 workflow and runs them on DBOS's thread pool. (Polling every 0.1 or 0.02 s
                 measured the same.)
- raw            the baseline: longcall's own SQL (``insert_run``, ``claim_runs``, and
                 ``claim_runs`` ending the run, with its task's checkpoint, and claiming the
                 next) sent by psycopg alone, no longcall code in the way, on longcall's
                 schema, on connections set up as longcall's are (statements prepared at
                 once, planned once).
                 4 processes of 4 threads, a connection each; each process LISTENs and a
                 NOTIFY wakes one of its waiting threads (every process hears every NOTIFY:
                 longcall's watch, one listener for all processes, is not reproduced). The
                 submit is one ``insert_run`` on one connection. longcall / raw says what
                 longcall's Python costs; raw / procrastinate what its SQL can reach at all.
                 Also run, not judged, as one process of 4 threads (one listener, so no
                 herd): with the workers live, its ratio to procrastinate 1 x 4 is about the
                 most longcall's SQL reaches on the machine with no Python of longcall's in
                 the way, the ceiling for the live 2x.

Then the start latency, workers idle (everything drained): submit one run; the task body
writes ``time.time()`` to a file the parent watches; latency = that time minus the time just
before the submit call (the submit's commit included). ``--probes`` a round, 50 ms apart, for
longcall and procrastinate (4 x 4). Not DBOS: its queue is polled, its start latency is
its polling interval.

Prints the rates per round and their medians, the ratios in both shapes, the latency median
and p90, and PASS/MISS against the targets: longcall at least 2x procrastinate's rate end to
end (live and phased), and a median start latency of at most 20 ms. Exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pg_databases import BenchDatabases, add_prefix_option

INSTALL = "pip install -e '.[postgres]' --group bench"
RATE_TARGET = 2.0  # longcall's runs/s over procrastinate's jobs/s
LATENCY_TARGET_MS = 20.0  # median start latency
WARMUP = 8
LIBRARIES = ("longcall", "procrastinate", "dbos", "raw")


def _mark(marks: Path, i: int) -> None:
    """A latency probe (negative ``i``): record when the task body started."""
    if i < 0:
        tmp = marks / f".{-i}.tmp"
        tmp.write_text(repr(time.time()))
        os.replace(tmp, marks / str(-i))


# -- the apps (built the same way in the parent and in every worker) --------------------


def longcall_app(url: str, marks: Path) -> Any:
    import longcall

    app = longcall.App(url)

    @app.task()
    def noop(i: int) -> dict[str, Any]:
        _mark(marks, i)
        return {"i": i}

    @app.workflow("one")
    def one(i: int) -> int:
        noop(i)
        return i

    return app


def procrastinate_app(url: str, marks: Path, pool: int) -> Any:
    try:
        import procrastinate
    except ImportError as exc:
        raise SystemExit(f"procrastinate is not installed ({exc}): {INSTALL}") from exc

    # It warns of an App built in __main__ (a worker importing tasks by path would not find
    # them); here every process registers its task itself.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=pool)
    )

    @app.task(name="noop")
    async def noop(i: int) -> None:
        _mark(marks, i)

    return app


def dbos_launch(url: str, marks: Path, index: int) -> Any:
    try:
        from dbos import DBOS
    except ImportError as exc:
        raise SystemExit(f"DBOS is not installed ({exc}): {INSTALL}") from exc

    DBOS(
        config={
            "name": "longcall-bench-runs",
            "system_database_url": url,
            "log_level": "WARNING",
            "executor_id": f"worker-{index}",
        }
    )

    @DBOS.step()
    def noop(i: int) -> dict[str, Any]:
        _mark(marks, i)
        return {"i": i}

    @DBOS.workflow(name="one")
    def one(i: int) -> int:
        noop(i)
        return i

    DBOS.launch()
    DBOS.register_queue("bench")
    return DBOS


def raw_queries() -> dict[str, str]:
    """The SQL longcall runs on PostgreSQL, by name: the raw baseline runs the same."""
    from longcall.store.queries import queries

    return queries("postgres")


def raw_connect(url: str, **options: Any) -> Any:
    """A connection set up as longcall's store sets up its own: its statements prepared at
    once and planned once (:func:`longcall.store.postgres.plan_once`)."""
    import psycopg

    from longcall.store.postgres import PREPARE_THRESHOLD, plan_once

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=PREPARE_THRESHOLD, **options)
    plan_once(conn)
    return conn


def runs_channel() -> str:
    """The channel longcall's submits notify and its workers listen on."""
    from longcall.store.runs import RUNS_CHANNEL

    return RUNS_CHANNEL


# claim_runs's parameters for ending nothing first (as longcall's store passes them).
RAW_NO_END = dict.fromkeys(("end_run_id", "end_holder", "status", "result", "error", "state"))
RAW_NO_END |= dict.fromkeys(("wake_at", "recv_topic"))
RAW_NO_END |= {"ahead": 0.0}  # only runs due now
RAW_STEP = ("position", "name", "args_hash", "result", "changes", "attempts", "started_at")
RAW_NO_END |= dict.fromkeys(f"step_{name}" for name in (*RAW_STEP, "finished_at"))


# -- worker processes -----------------------------------------------------------------


def _ready() -> None:
    print("ready", flush=True)


def _stop_with_parent() -> None:
    """Stop this worker as SIGTERM does once the parent is gone (its end of our stdin
    closes): a parent that died would otherwise leave workers behind, taking the next
    benchmark's runs and holding connections a DROP DATABASE has to wait for."""
    import threading

    def watch() -> None:
        # os.read, not sys.stdin: a daemon thread blocked inside the buffered reader holds
        # its lock, and the interpreter aborts at exit ("could not acquire lock").
        while os.read(0, 4096):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def longcall_worker(url: str, marks: Path, concurrency: int) -> None:
    app = longcall_app(url, marks)
    worker = app.run_worker(concurrency=concurrency)

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        running = asyncio.create_task(worker.run(stop))
        await asyncio.sleep(0.2)  # its listener connects and LISTENs
        _ready()
        await running

    try:
        asyncio.run(main())
    finally:
        app.close()


def procrastinate_worker(url: str, marks: Path, concurrency: int) -> None:
    app = procrastinate_app(url, marks, pool=8)

    async def main() -> None:
        async with app.open_async():
            running = asyncio.create_task(
                app.run_worker_async(
                    concurrency=concurrency, wait=True, install_signal_handlers=True
                )
            )
            await asyncio.sleep(0.2)
            _ready()
            await running

    asyncio.run(main())


def raw_worker(url: str, marks: Path, concurrency: int, index: int) -> None:
    """longcall's SQL for one run, driven by psycopg alone: claim, then end with the task's
    checkpoint (which claims the next run, as longcall's does). ``concurrency`` threads, a
    connection each; a listener thread wakes one waiting thread per NOTIFY; a thread waits at
    most 1 s."""
    import threading

    import psycopg
    from psycopg.rows import dict_row

    from longcall.store.queries import with_filters, with_limit

    q = raw_queries()
    # Its LIMIT written in, and without the registered-workflows filter (runs of any workflow),
    # as longcall's store sends it.
    claim_sql = with_limit(with_filters(q["claim_runs"], frozenset()), 1)
    stop = threading.Event()
    wake = threading.Condition()
    listening = threading.Event()

    def listen() -> None:
        conn = psycopg.connect(url, autocommit=True)
        conn.execute(f"LISTEN {runs_channel()}")
        listening.set()
        for _ in conn.notifies():
            with wake:
                wake.notify()

    def slot(number: int) -> None:
        conn = raw_connect(url, row_factory=dict_row)
        claims = iter(range(1, 1 << 62))

        def claim(**end: Any) -> tuple[str, list[dict[str, Any]]]:
            holder = f"raw-{index}/{number}/{next(claims)}"
            params = {**RAW_NO_END, **end, "holder": holder, "lease": 30.0, "limit": 1}
            rows = conn.execute(claim_sql, {**params, "now": None}).fetchall()
            return holder, [r for r in rows if r["kind"] == "claimed"]

        while not stop.is_set():
            holder, claimed = claim()
            while claimed:
                run = claimed[0]
                i = run["input"]
                started = time.time()
                _mark(marks, i)  # the task's body
                # Its checkpoint is written by the statement that ends the run, as longcall's
                # sync runs do.
                ended = {"end_run_id": run["run_id"], "end_holder": holder}
                ended |= {"status": "completed", "result": json.dumps(i), "state": "{}"}
                ended |= {"step_position": 1, "step_name": "noop", "step_args_hash": "-"}
                ended |= {"step_result": json.dumps({"i": i}), "step_changes": "[]"}
                ended |= {"step_attempts": 1, "step_started_at": started}
                ended |= {"step_finished_at": time.time()}
                holder, claimed = claim(**ended)
            with wake:
                wake.wait(1.0)

    threading.Thread(target=listen, daemon=True).start()
    for number in range(concurrency):
        threading.Thread(target=slot, args=(number,), daemon=True).start()
    listening.wait(10)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _ready()
    stop.wait()


def dbos_worker(url: str, marks: Path, index: int) -> None:
    import threading

    dbos = dbos_launch(url, marks, index)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _ready()
    stop.wait()
    dbos.destroy()


# -- the parent ----------------------------------------------------------------------


@dataclass
class Subject:
    """One library in one shape: how to start its workers, submit a run, count finished ones."""

    label: str
    library: str
    workers: int
    concurrency: int
    probes: bool
    rates: list[float] = field(default_factory=list)  # end to end, workers live
    phased_rates: list[float] = field(default_factory=list)  # end to end, workers held
    submit_rates: list[float] = field(default_factory=list)  # the submits alone (phased)
    drain_rates: list[float] = field(default_factory=list)  # the work alone (phased)
    latencies: list[float] = field(default_factory=list)


FINISHED = {
    "longcall": "SELECT count(*) FROM lc_runs WHERE status = 'completed'",
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
    "dbos": "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'",
}
FINISHED["raw"] = FINISHED["longcall"]


class Counter:
    """Counts finished runs on a connection of its own."""

    def __init__(self, url: str, query: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.query = query

    def count(self) -> int:
        row = self.conn.execute(self.query).fetchone()
        return int(row[0]) if row else 0

    def wait(self, n: int, timeout: float = 300.0, interval: float = 0.01) -> None:
        give_up = time.monotonic() + timeout
        while self.count() < n:
            if time.monotonic() > give_up:
                raise SystemExit(f"only {self.count()} of {n} runs finished in {timeout:g}s")
            time.sleep(interval)

    def close(self) -> None:
        self.conn.close()


class Submitter:
    """The parent's side of one library: set up its database and submit runs one by one."""

    def __init__(self, library: str, url: str, marks: Path) -> None:
        self.library = library
        self._close: Callable[[], None] = lambda: None
        if library == "longcall":
            app = longcall_app(url, marks)  # migrates the fresh database
            self.submit: Callable[[int], Any] = lambda i: app.submit_run("one", i)
            self._close = app.close
        elif library == "raw":
            import uuid

            longcall_app(url, marks).close()  # the schema
            conn = raw_connect(url)
            insert = raw_queries()["insert_run"]
            queued = dict.fromkeys(("user_id", "job_id", "cron_id", "concurrency_key"))
            queued |= dict.fromkeys(("idempotency_key", "timeout_secs", "holder", "now"))
            queued |= {"workflow_id": "one", "status": "queued", "max_retries": 0, "lease": 0.0}
            queued |= {"channel": runs_channel()}
            queued |= {"queue_name": None, "priority": 0, "dedupe_id": None, "version": "1"}
            self.submit = lambda i: conn.execute(
                insert, {**queued, "run_id": uuid.uuid4().hex, "input": json.dumps(i)}
            ).fetchall()
            self._close = conn.close
        elif library == "procrastinate":
            papp = procrastinate_app(url, marks, pool=2)
            papp.open()
            papp.schema_manager.apply_schema()
            task = papp.tasks["noop"]
            self.submit = lambda i: task.defer(i=i)
            self._close = papp.close
        else:
            self.url = url

    def after_workers(self) -> None:
        """DBOS: its first worker created the system database; the client needs it there."""
        if self.library == "dbos":
            from dbos import DBOSClient

            client = DBOSClient(system_database_url=self.url)
            options: Any = {"queue_name": "bench", "workflow_name": "one"}
            self.submit = lambda i: client.enqueue(options, i)
            self._close = client.destroy

    def close(self) -> None:
        self._close()


def _start_workers(subject: Subject, url: str, marks: Path) -> list[Any]:
    procs = []
    for index in range(subject.workers):
        command = [
            sys.executable,
            __file__,
            "--worker",
            subject.library,
            "--url",
            url,
            "--marks",
            str(marks),
            "--concurrency",
            str(subject.concurrency),
            "--index",
            str(index),
        ]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # one at a time: DBOS migrates its schema on launch
        if line.strip() != "ready":
            _stop_workers(procs)
            raise SystemExit(f"a {subject.library} worker did not start (exit {proc.poll()})")
    return procs


def _stop_workers(procs: list[Any]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(subject: Subject, databases: BenchDatabases, runs: int, probes: int, tmp: Path) -> None:
    """One round: fresh database, workers up, warm-up, the timed batch, then the probes."""
    url = databases.fresh(f"runs_{subject.library}")
    marks = Path(tempfile.mkdtemp(prefix="marks-", dir=tmp))
    submitter = Submitter(subject.library, url, marks)
    procs: list[Any] = []
    counter = None
    try:
        procs = _start_workers(subject, url, marks)
        submitter.after_workers()
        counter = Counter(url, FINISHED[subject.library])
        time.sleep(0.5)
        for i in range(WARMUP):
            submitter.submit(100_000_000 + i)
        counter.wait(WARMUP)
        done = WARMUP

        # Live: the workers take runs as they are submitted.
        started = time.perf_counter()
        for i in range(runs):
            submitter.submit(i)
        counter.wait(done + runs)
        subject.rates.append(runs / (time.perf_counter() - started))
        done += runs

        # Phased: the workers are held (SIGSTOP) while the parent submits, so the two phases
        # do not share the two cores, and are let go (SIGCONT) all at once.
        for proc in procs:
            proc.send_signal(signal.SIGSTOP)
        started = time.perf_counter()
        for i in range(runs):
            submitter.submit(runs + i)
        submitted = time.perf_counter()
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
        counter.wait(done + runs)
        finished = time.perf_counter()
        subject.phased_rates.append(runs / (finished - started))
        subject.submit_rates.append(runs / (submitted - started))
        subject.drain_rates.append(runs / (finished - submitted))
        done += runs

        if subject.probes:
            for k in range(1, probes + 1):
                time.sleep(0.05)
                before = time.time()
                submitter.submit(-k)
                began = _wait_mark(marks / str(k))
                subject.latencies.append(began - before)
                done += 1
                counter.wait(done)  # drained before the next probe
    finally:
        if counter is not None:
            counter.close()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        _stop_workers(procs)
        submitter.close()


def _wait_mark(path: Path, timeout: float = 30.0) -> float:
    give_up = time.monotonic() + timeout
    while True:
        try:
            return float(path.read_text())
        except (FileNotFoundError, ValueError):
            if time.monotonic() > give_up:
                raise SystemExit(f"no task started for {path.name} in {timeout:g}s") from None
            time.sleep(0.0005)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs in the timed batch")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the figures are medians")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="runs at once per worker")
    parser.add_argument("--probes", type=int, default=50, help="start-latency probes a round")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "LONGCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="an admin URL; the benchmark creates and drops its own databases beside it",
    )
    add_prefix_option(parser)
    parser.add_argument("--only", choices=LIBRARIES, help="measure one library (no ratios judged)")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--marks", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        _stop_with_parent()
    if args.worker == "longcall":
        longcall_worker(args.url, args.marks, args.concurrency)
        return 0
    if args.worker == "procrastinate":
        procrastinate_worker(args.url, args.marks, args.concurrency)
        return 0
    if args.worker == "raw":
        raw_worker(args.url, args.marks, args.concurrency, args.index)
        return 0
    if args.worker == "dbos":
        dbos_worker(args.url, args.marks, args.index)
        return 0

    w, c = args.workers, args.concurrency
    subjects = [
        Subject("longcall", "longcall", w, c, probes=True),
        Subject(f"procrastinate {w}x{c}", "procrastinate", w, c, probes=True),
        Subject("procrastinate 1x4", "procrastinate", 1, 4, probes=False),
        # Not judged: longcall in procrastinate's faster shape, for a same-shape ratio.
        Subject("longcall 1x4", "longcall", 1, 4, probes=False),
        Subject(f"DBOS queue {w} procs", "dbos", w, 0, probes=False),
        Subject("raw psycopg, same SQL", "raw", w, c, probes=False),
        Subject("raw 1x4", "raw", 1, 4, probes=False),  # not judged: the SQL's ceiling
    ]
    if args.only:
        subjects = [s for s in subjects if s.library == args.only][:1]

    databases = BenchDatabases(args.pg, args.db_prefix)
    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-runs-"))
    try:
        for round_no in range(args.rounds):
            for subject in subjects:
                measure(subject, databases, args.runs, args.probes, tmp)
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        databases.drop_all()

    print(f"{args.runs:,} one-task runs on PostgreSQL, submitted serially (one call and one")
    print("transaction each, no batching, every library); runs/s, medians. End to end with the")
    print("workers live, and phased (workers held during the submits): its submits and work alone")
    print(
        f"{'library':<22}{'procs':>6}{'conc.':>6}{'live':>7}{'phased':>8}{'submits':>9}"
        f"{'work':>7}  live rounds"
    )
    median: dict[str, float] = {}
    phased: dict[str, float] = {}
    for s in subjects:
        median[s.label] = statistics.median(s.rates)
        phased[s.label] = statistics.median(s.phased_rates)
        rounds = " ".join(f"{r:,.0f}" for r in s.rates)
        conc = "-" if s.library == "dbos" else str(s.concurrency)
        print(
            f"{s.label:<22}{s.workers:>6}{conc:>6}{median[s.label]:>7,.0f}"
            f"{phased[s.label]:>8,.0f}{statistics.median(s.submit_rates):>9,.0f}"
            f"{statistics.median(s.drain_rates):>7,.0f}  {rounds}"
        )

    lat: dict[str, float] = {}
    if any(s.latencies for s in subjects):
        print(f"\n{'start latency (idle workers)':<32}{'probes':>7}{'median ms':>11}{'p90 ms':>9}")
    for s in subjects:
        if s.latencies:
            lat[s.label] = statistics.median(s.latencies) * 1000
            p90 = _pct(s.latencies, 0.9) * 1000
            print(f"{s.label:<32}{len(s.latencies):>7}{lat[s.label]:>11.2f}{p90:>9.2f}")

    if args.only:
        return 0
    print(f"\n{'ratio':<48}{'measured':>9}  target")
    failed = False
    for shape, rates in (("live", median), ("phased", phased)):
        best = max(rates[s.label] for s in subjects if s.library == "procrastinate")
        for s in subjects[1:]:
            if s.library == "longcall":
                continue
            ratio = rates["longcall"] / rates[s.label]
            verdict = "(none)"
            if s.library == "procrastinate" and rates[s.label] == best:
                ok = ratio >= RATE_TARGET
                failed |= not ok
                verdict = f">= {RATE_TARGET:g}  {'PASS' if ok else 'MISS'}"
            print(f"{f'runs/s {shape:<7} longcall / ' + s.label:<48}{ratio:>8.2f}x  {verdict}")
        if "longcall 1x4" in rates and "procrastinate 1x4" in rates:
            ratio = rates["longcall 1x4"] / rates["procrastinate 1x4"]
            label = f"runs/s {shape:<7} same shape, 1x4 each"
            print(f"{label:<48}{ratio:>8.2f}x  (none)")
        for raw in (s for s in subjects if s.library == "raw"):
            # What longcall's SQL reaches with no longcall in between, in each shape.
            ratio = rates[raw.label] / best
            label = f"runs/s {shape:<7} raw {raw.workers}x{raw.concurrency} / procrastinate"
            print(f"{label:<48}{ratio:>8.2f}x  (none)")
    peer = f"procrastinate {w}x{c}"
    if "longcall" in lat and peer in lat:
        ratio = lat["longcall"] / lat[peer]
        print(f"{'latency longcall / ' + peer:<48}{ratio:>8.2f}x  (none)")
    if "longcall" in lat:
        ok = lat["longcall"] <= LATENCY_TARGET_MS
        failed |= not ok
        print(
            f"{'latency longcall median (ms)':<48}{lat['longcall']:>9.2f}  "
            f"<= {LATENCY_TARGET_MS:g}  {'PASS' if ok else 'MISS'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
