"""Bad ids from one user do not slow another's requests (issue 21, item 2).

Run:  python bench/bad_ids.py --database sqlite:////tmp/bad_ids.db
      python bench/bad_ids.py --database postgresql://postgres@127.0.0.1:5432/bad_ids

The database must exist (a SQLite file is created; a PostgreSQL database is not) and is
written to: use a throwaway one. ``longcall serve`` runs as a subprocess, as in production.
bob sends ``--waves`` waves of 50 concurrent requests carrying ids too large to index (1,000
four-byte characters) or with a NUL, on every kind of endpoint; meanwhile alice alternates
``POST /v1/jobs`` and ``GET /v1/jobs/{id}``, each on a keep-alive connection. It prints
alice's latency with and without the flood, and how bob's requests were answered; it exits
1 if alice's slowest request under the flood took over 100 ms (the issue's target) or if
any bob request was answered 5xx.

(The in-process server of the test suite adds about 40 ms to every request of its own
client, so the real figures come from here.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx

import longcall

HUGE = "\U0001f600" * 1000
SPOTS = [
    ("GET", "/v1/jobs/{id}", None, None),
    ("POST", "/v1/jobs/{id}/complete", None, {}),
    ("GET", "/v1/runs/{id}", None, None),
    ("GET", "/v1/cron/{id}", None, None),
    ("GET", "/v1/sessions/{id}/transcript", None, None),
    ("GET", "/v1/jobs", "session", None),
    ("GET", "/v1/jobs", "tool", None),
    ("GET", "/v1/runs", "workflow", None),
    ("POST", "/v1/jobs", None, {"toolName": "t", "sessionId": "{id}", "callId": "c"}),
    ("POST", "/v1/jobs", None, {"toolName": "t", "jobId": "{id}"}),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"n={len(times)} median {statistics.median(times) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    )


def alice_requests(
    base: str, token: str, prefix: str, stop: threading.Event, at_least: int
) -> list[float]:
    times: list[float] = []
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        n = 0
        while not stop.is_set() or n < at_least:
            started = time.monotonic()
            if n % 2:
                got = client.get(f"/v1/jobs/{prefix}-0")
                assert got.status_code == 200, got.text
            else:
                got = client.post("/v1/jobs", json={"toolName": "t", "jobId": f"{prefix}-{n}"})
                assert got.status_code == 201, got.text
            times.append(time.monotonic() - started)
            n += 1
    return times


async def flood(base: str, token: str, waves: int) -> Counter[int]:
    statuses: Counter[int] = Counter()
    limits = httpx.Limits(max_connections=50)
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as c:

        async def one(i: int) -> int:
            method, path, query, body = SPOTS[i % len(SPOTS)]
            value = HUGE if i % 2 else "a\x00b"
            url = path.replace("{id}", quote(value, safe=""))
            params = {query: value} if query else None
            payload = None
            if body is not None:
                payload = {k: (value if v == "{id}" else v) for k, v in body.items()}
            got = await c.request(method, url, params=params, json=payload)
            return got.status_code

        for _ in range(waves):
            statuses.update(await asyncio.gather(*(one(i) for i in range(50))))
    return statuses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--waves", type=int, default=10)
    args = parser.parse_args()
    app = longcall.App(args.database)
    alice = app.store.create_token(user_id="alice")[1]
    bob = app.store.create_token(user_id="bob")[1]
    app.close()
    port = free_port()
    exe = shutil.which("longcall") or str(Path(sys.executable).parent / "longcall")
    server = subprocess.Popen(
        [exe, "serve", "--database", args.database, "--port", str(port), "--no-worker"],
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        stop = threading.Event()
        stop.set()
        quiet = alice_requests(base, alice, f"quiet-{port}", stop, 200)
        stop.clear()
        loaded: list[float] = []
        watcher = threading.Thread(
            target=lambda: loaded.extend(alice_requests(base, alice, f"busy-{port}", stop, 20))
        )
        watcher.start()
        started = time.monotonic()
        statuses = asyncio.run(flood(base, bob, args.waves))
        took = time.monotonic() - started
        stop.set()
        watcher.join()
    finally:
        server.terminate()
        server.wait(30)
    print(f"database: {args.database.split(':')[0]}")
    print(f"alice, no flood:   {summary(quiet)}")
    print(f"alice, with flood: {summary(loaded)}")
    print(
        f"bob: {sum(statuses.values())} bad-id requests in {took:.2f} s, answers {dict(statuses)}"
    )
    bad = max(loaded) > 0.1 or any(s >= 500 for s in statuses)
    print("target (alice's max under 100 ms, no 5xx):", "missed" if bad else "met")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
