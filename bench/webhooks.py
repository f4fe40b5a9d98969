"""Signed completions through ``POST /v1/hooks/{source}`` against a bare ASGI endpoint.

Run:  python bench/webhooks.py                          (4,000 deliveries, 32 connections, 3 rounds)
      python bench/webhooks.py --deliveries 10000 --connections 64 --rounds 5
      python bench/webhooks.py --synchronous NORMAL

Each side is served by uvicorn (one process, same options, the same HTTP implementation:
``HTTP`` below, httptools, longcall's default) in a process of its own, on a fresh SQLite file
(WAL, ``synchronous=FULL`` unless told otherwise) holding the same jobs, each started and
attached to a session. The load generator is a third process: ``--connections``
keep-alive connections, each sending its next request once the previous answer is in (raw
HTTP/1.1 over asyncio streams, so the generator costs little of the machine's CPU). Every
delivery is a Standard Webhooks-signed ``complete`` with its own ``webhook-id``, for its own
job, signed before the clock starts. Then the same deliveries are posted again: the duplicate
path.

- longcall: ``longcall.server.runner.build`` (the server ``longcall serve`` runs).
- bare: a raw ASGI callable that reads the body, reads the source's secrets (the same query),
  verifies with ``standardwebhooks.Webhook.verify`` and runs the statements ``Store.ingest``
  runs for a completion (the named queries of ``queries.sql`` through ``sqlite3``, the same
  pragmas, ``BEGIN IMMEDIATE``, one in-process write lock, a pool of 8 threads), committing
  before it answers. Its uvicorn runs uvicorn's own httptools protocol, the parser and request
  cycle longcall's server runs, minus longcall's slow-client deadlines: the comparison measures
  the app and those deadlines, not a difference of HTTP parsers (change ``HTTP`` for both).

Prints deliveries per second, p50 and p99 latency for both sides, the ratio of the medians
over the rounds (rounds alternate sides), and PASS/MISS against the targets: longcall at least
0.6 of the bare rate with p99 under 50 ms on the first delivery. Exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

import longcall
from longcall.store import queries as sql
from longcall.store.base import dumps

try:
    from standardwebhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError

    from longcall.webhooks import new_secret, sign
except ImportError:  # pragma: no cover - depends on the installed extras
    sys.exit("bench/webhooks.py needs the server extra: pip install 'longcall[server]'")

RATIO_TARGET = 0.6
P99_TARGET = 0.050  # seconds
SOURCE = "bench"
MAX_BODY = 1 << 20
THREADS = 8  # longcall's App default
HTTP: Literal["httptools"] = "httptools"  # uvicorn's HTTP implementation, for both sides


# -- the bare endpoint ------------------------------------------------------------------


class Bare:
    """A minimal ASGI webhook receiver doing what longcall's does, and nothing else."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.path = path
        self.synchronous = synchronous
        self.q = sql.queries("sqlite")
        self.local = threading.local()
        self.write_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(THREADS)

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            self.local.conn = conn
        return conn

    def secrets(self, source: str) -> list[str]:
        rows = self.conn().execute(self.q["hook_secrets"], {"source": source}).fetchall()
        return [row["secret"] for row in rows]

    def ingest(self, source: str, delivery_id: str, job_id: str, result: Any) -> str:
        """Store.ingest's statements for a ``complete``, in one transaction."""
        conn, q, now = self.conn(), self.q, time.time()
        ids = {"source": source, "delivery_id": delivery_id}
        with self.write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                new = conn.execute(
                    q["insert_inbox"], {"job_id": job_id, "kind": "complete", "now": now, **ids}
                ).fetchall()
                if not new:
                    conn.execute("COMMIT")
                    return "duplicate"
                data = dumps(result)
                rows = conn.execute(
                    q["finish_job"],
                    {"job_id": job_id, "state": "succeeded", "result": data, "now": now},
                ).fetchall()
                if rows:
                    conn.execute(
                        q["insert_event"],
                        {
                            "job_id": job_id,
                            "seq": rows[0]["event_seq"],
                            "kind": "succeeded",
                            "data": data,
                            "now": now,
                        },
                    )
                    if rows[0]["delivery"] == "ready":
                        conn.execute(q["notify"], {"channel": "longcall", "payload": "ready"})
                    outcome = "applied"
                elif conn.execute(q["get_job"], {"job_id": job_id}).fetchall():
                    seq = conn.execute(q["bump_event_seq"], {"job_id": job_id}).fetchall()
                    ignored = {"state": "succeeded", "result": result, "reason": "already done"}
                    conn.execute(
                        q["insert_event"],
                        {
                            "job_id": job_id,
                            "seq": seq[0]["event_seq"],
                            "kind": "ignored",
                            "data": dumps(ignored),
                            "now": now,
                        },
                    )
                    outcome = "unchanged"
                else:
                    conn.execute(
                        q["insert_early_result"],
                        {"job_id": job_id, "state": "succeeded", "result": data, "now": now, **ids},
                    )
                    outcome = "early"
                conn.execute(q["set_inbox_outcome"], {"outcome": outcome, **ids})
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return outcome

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/healthz":
            await self.answer(send, 200, {"status": "ok"})
            return
        source = scope["path"].removeprefix("/v1/hooks/")
        if scope["method"] != "POST" or source == scope["path"]:
            await self.answer(send, 404, {"error": "not found"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY:
                await self.answer(send, 413, {"error": "too large"})
                return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        loop = asyncio.get_running_loop()
        secrets = await loop.run_in_executor(self.pool, self.secrets, source)
        payload = None
        for secret in secrets:
            try:
                payload = Webhook(secret).verify(body, headers)
                break
            except WebhookVerificationError:
                continue
        if payload is None:
            await self.answer(send, 401, {"error": "unauthorized"})
            return
        outcome = await loop.run_in_executor(
            self.pool,
            self.ingest,
            source,
            headers["webhook-id"],
            payload["jobId"],
            payload.get("result"),
        )
        await self.answer(send, 200, {"outcome": outcome, "jobId": payload["jobId"]})

    @staticmethod
    async def answer(send: Any, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def serve(kind: str, path: str, port: int, synchronous: str) -> None:
    """Run one side's server in this process until it is terminated."""
    import uvicorn

    # uvicorn raises SIGTERM again after draining; exit 0 then, as `longcall serve` does.
    signal.signal(signal.SIGTERM, lambda *_: None)

    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "timeout_keep_alive": 5,
        "backlog": 2048,
        "ws": "none",
    }
    if kind == "bare":
        config = uvicorn.Config(Bare(path, synchronous), http=HTTP, lifespan="off", **options)
        uvicorn.Server(config).run()
        return
    from longcall.server import runner

    app = longcall.App(f"sqlite:///{path}?synchronous={synchronous}", threads=THREADS)
    try:
        runner.build(app, http=HTTP, **options).run()
    finally:
        app.close()


# -- the load generator (a process of its own) ------------------------------------------


Sent = tuple[float, float, list[float], list[bytes]]


def load(port: int, requests: list[bytes], connections: int) -> Sent:
    """Send every request over ``connections`` keep-alive connections.

    Returns the seconds it all took, the CPU seconds the generator used meanwhile, each
    request's latency and each answer (status, a space, the body).
    """
    return asyncio.run(_load(port, requests, connections))


async def _load(port: int, requests: list[bytes], connections: int) -> Sent:
    latencies = [0.0] * len(requests)
    answers = [b""] * len(requests)
    pending = iter(range(len(requests)))
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in pending:
            started = time.perf_counter()
            writer.write(requests[i])
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length)
            latencies[i] = time.perf_counter() - started
            answers[i] = head[9:12] + b" " + body

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(r, w) for r, w in streams))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    for _, writer in streams:
        writer.close()
    return elapsed, cpu, latencies, answers


# -- the run ----------------------------------------------------------------------------


@dataclass
class Figures:
    rate: float
    p50: float
    p99: float
    generator_cpu: float  # the load generator's share of one CPU


def seed(path: Path, jobs: int, synchronous: str) -> str:
    """A fresh store with ``jobs`` started, attached jobs and a secret for the source."""
    app = longcall.App(f"sqlite:///{path}?synchronous={synchronous}")
    secret = app.store.add_hook_secret(SOURCE, new_secret()).secret
    app.close()
    conn = sqlite3.connect(path, isolation_level=None)
    q = sql.queries("sqlite")
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    for i in range(jobs):
        conn.execute(
            q["insert_job"],
            {
                "job_id": f"job-{i}",
                "tool_name": "export",
                "args": dumps({"n": i}),
                "app_name": "bench",
                "user_id": "u",
                "session_id": f"s-{i}",
                "call_id": f"c-{i}",
                "invocation_id": "inv",
                "deadline": None,
                "now": now,
            },
        ).fetchall()
    conn.execute("COMMIT")
    conn.close()
    return secret


def signed_requests(secret: str, host: str, first: int, count: int) -> list[bytes]:
    """Signed ``complete`` deliveries for jobs ``first`` .. ``first + count - 1``."""
    out = []
    for i in range(first, first + count):
        job_id = f"job-{i}"
        body = dumps({"jobId": job_id, "type": "complete", "result": {"rows": i}}).encode()
        headers = sign(body, secret, webhook_id=f"msg_{uuid.uuid4().hex}")
        head = [
            f"POST /v1/hooks/{SOURCE} HTTP/1.1",
            f"host: {host}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        out.append(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(kind: str, path: Path, synchronous: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [sys.executable, __file__, "--serve", kind, "--db", str(path)]
    proc = subprocess.Popen([*command, "--port", str(port), "--synchronous", synchronous])
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                if conn.recv(100).startswith(b"HTTP/1.1 200"):
                    return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit(f"the {kind} server did not come up")
        time.sleep(0.05)


def figures(sent: Sent) -> Figures:
    elapsed, cpu, latencies, _ = sent
    ordered = sorted(latencies)
    return Figures(
        len(latencies) / elapsed,
        ordered[len(ordered) // 2],
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        cpu / elapsed,
    )


def check(kind: str, answers: list[bytes], expected: str) -> None:
    outcomes = Counter(
        (a[:3].decode(), json.loads(a[4:]).get("outcome", a[4:].decode())) for a in answers
    )
    if outcomes != Counter({("200", expected): len(answers)}):
        raise SystemExit(f"{kind}: expected every answer 200 {expected!r}, got {dict(outcomes)}")


def one_side(
    kind: str,
    tmp: Path,
    generator: ProcessPoolExecutor,
    args: argparse.Namespace,
) -> tuple[Figures, Figures]:
    """First deliveries, then the same again, against a fresh server of ``kind``."""
    warmup = 4 * args.connections
    path = tmp / f"{kind}-{uuid.uuid4().hex[:8]}.db"
    secret = seed(path, warmup + args.deliveries, args.synchronous)
    warm = signed_requests(secret, "127.0.0.1", 0, warmup)
    requests = signed_requests(secret, "127.0.0.1", warmup, args.deliveries)
    proc, port = start(kind, path, args.synchronous)
    try:
        generator.submit(load, port, warm, args.connections).result()
        sent = generator.submit(load, port, requests, args.connections).result()
        check(kind, sent[3], "applied")
        first = figures(sent)
        sent = generator.submit(load, port, requests, args.connections).result()
        check(kind, sent[3], "duplicate")
        again = figures(sent)
    finally:
        proc.terminate()
        proc.wait(30)
    with longcall.App(f"sqlite:///{path}", migrate=False) as app:
        done = app.store.counts()
    succeeded = sum(n for (state, _), n in done.items() if state == "succeeded")
    if succeeded != warmup + args.deliveries:
        raise SystemExit(f"{kind}: {succeeded} jobs succeeded, not {warmup + args.deliveries}")
    return first, again


def median(values: list[Figures]) -> Figures:
    return Figures(
        statistics.median(f.rate for f in values),
        statistics.median(f.p50 for f in values),
        statistics.median(f.p99 for f in values),
        statistics.median(f.generator_cpu for f in values),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=4000, help="per side and round")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians")
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    parser.add_argument("--serve", choices=["bare", "longcall"], help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.db, args.port, args.synchronous)
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="longcall-bench-http-"))
    results: dict[str, list[tuple[Figures, Figures]]] = {"bare": [], "longcall": []}
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as generator:
        for _ in range(args.rounds):
            for kind in ("bare", "longcall"):
                results[kind].append(one_side(kind, tmp, generator, args))
    print(
        f"SQLite {args.synchronous}, {args.deliveries:,} deliveries x {args.rounds} rounds, "
        f"{args.connections} connections, {os.cpu_count()} CPUs"
    )
    print(f"{'':<24}{'deliveries/s':>13}{'p50 ms':>9}{'p99 ms':>9}{'generator CPU':>15}")
    rows = {}
    for path_name, index in (("first delivery", 0), ("duplicate", 1)):
        for kind in ("bare", "longcall"):
            got = median([r[index] for r in results[kind]])
            rows[kind, index] = got
            label = f"{kind} {path_name}"
            print(
                f"{label:<24}{got.rate:>13,.0f}{got.p50 * 1000:>9.1f}{got.p99 * 1000:>9.1f}"
                f"{got.generator_cpu:>14.0%}"
            )
    ratio = rows["longcall", 0].rate / rows["bare", 0].rate
    dup_ratio = rows["longcall", 1].rate / rows["bare", 1].rate
    p99 = rows["longcall", 0].p99
    ok_ratio, ok_p99 = ratio >= RATIO_TARGET, p99 < P99_TARGET
    verdict = "PASS" if ok_ratio else "MISS"
    print(f"\nratio longcall/bare     {ratio:.2f}  >= {RATIO_TARGET}  {verdict}")
    print(
        f"longcall p99            {p99 * 1000:.1f} ms  < {P99_TARGET * 1000:.0f} ms  "
        f"{'PASS' if ok_p99 else 'MISS'}"
    )
    print(f"duplicate ratio         {dup_ratio:.2f}  (no target)")
    return 0 if ok_ratio and ok_p99 else 1


if __name__ == "__main__":
    sys.exit(main())
