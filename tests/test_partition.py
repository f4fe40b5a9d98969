"""Several hosts and a network partition: the exactly-once guarantees across a cut link.

Three test hosts are Linux network namespaces on this machine (``tests/netns.py``), each with
a longcall worker (``tests/procs.py``) that reaches a throwaway PostgreSQL cluster in the root
namespace over its own veth link. The workers' agent writes its function responses into
:class:`~procs.AgentStore`, a plain table on the same cluster with no unique index per call,
so a doubled delivery is a second row rather than a refused one. One host's link is cut in
the middle of its deliveries and healed once another host has taken over its work. A second
test cuts a host in the middle of one of longcall's transactions and checks that the server
ends it, so its row locks do not hold up the other hosts.

Needs root for the namespaces: outside CI the test skips without it, under ``CI=true`` it
fails instead.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

import netns
from longcall import App, Delivery, JobState, SessionKey
from longcall.core.jobs import parse_duration
from longcall.store.postgres import IDLE_IN_TRANSACTION_TIMEOUT
from longcall.testing.scripted import FINAL_STATUSES
from pg_cluster import ClusterUnavailable, ThrowawayCluster
from procs import (
    AgentStore,
    LogFile,
    Proc,
    Recorder,
    agent_store_rows,
    build_app,
    log_kind,
    overlapping_runs,
    procs,
    read_log,
    seed,
    sql_rows,
    stats_of,
    tracebacks,
    wait_for,
)

pytestmark = pytest.mark.postgres

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HOSTS = 3
CUT = 0  # the host whose link is cut
LEASE = 3.0  # seconds: the claims of the cut host run out while it still runs (short, yet
# with room for a loaded machine: a host stalled past it overlaps like a cut one)
THINK = 0.5  # seconds each delivery's model reply takes, before the agent stores the response
SESSIONS, TURNS = 25, 3  # "reports" turns: 3 calls each, so 225 jobs

# Every change of a session lease's holder and of a job's claim, on the database's clock.
AUDIT = """
CREATE TABLE test_audit (
    kind    TEXT NOT NULL,   -- take (a session lease), claim or outcome:<delivery> (a job)
    key     TEXT NOT NULL,   -- the session id or the job id
    holder  TEXT NOT NULL,   -- who took it, or whose claim the outcome ended
    at      DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM clock_timestamp())
);
CREATE FUNCTION test_audit_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR OLD.holder IS DISTINCT FROM NEW.holder THEN
        INSERT INTO test_audit (kind, key, holder) VALUES ('take', NEW.session_id, NEW.holder);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER test_audit_lease AFTER INSERT OR UPDATE ON lc_session_leases
    FOR EACH ROW EXECUTE FUNCTION test_audit_lease();
CREATE FUNCTION test_audit_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.claim_holder IS NOT NULL AND (NEW.claim_holder IS DISTINCT FROM OLD.claim_holder
                                         OR NEW.attempts > OLD.attempts) THEN
        INSERT INTO test_audit (kind, key, holder) VALUES ('claim', NEW.job_id, NEW.claim_holder);
    ELSIF OLD.claim_holder IS NOT NULL AND NEW.claim_holder IS NULL THEN
        INSERT INTO test_audit (kind, key, holder)
        VALUES ('outcome:' || NEW.delivery, NEW.job_id, OLD.claim_holder);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER test_audit_job AFTER UPDATE ON lc_jobs
    FOR EACH ROW EXECUTE FUNCTION test_audit_job();
"""


class LateWriteByCutHost(AssertionError):
    """The cut host wrote (its agent's store, or the job table) into a session after its
    lease ran out and another process took the session."""


@dataclass
class Network:
    hosts: netns.Hosts
    cluster: ThrowawayCluster


@pytest.fixture
def network() -> Iterator[Network]:
    """Three namespaced hosts and a throwaway cluster listening on their links."""
    reason = netns.unavailable()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true but this machine cannot make test hosts: {reason}")
        pytest.skip(f"no network namespaces for test hosts: {reason}")
    hosts = netns.Hosts(HOSTS)
    try:
        try:
            cluster = ThrowawayCluster(
                listen=("127.0.0.1", *hosts.gateways), trust=(netns.NETWORK,)
            )
        except ClusterUnavailable as exc:
            if IN_CI:
                pytest.fail(f"CI=true but no throwaway PostgreSQL cluster can run here: {exc}")
            pytest.skip(f"no throwaway PostgreSQL cluster: {exc}")
        try:
            cluster.start()
            yield Network(hosts, cluster)
        finally:
            cluster.remove()
    finally:
        hosts.remove()


def pid_of(holder: str) -> str:
    """The process id in a holder name (``host:pid:role:suffix``); a released lease's
    empty holder is nobody's."""
    parts = holder.split(":")
    return parts[-3] if len(parts) >= 3 else holder


@dataclass(frozen=True)
class Effect:
    """Something a process wrote: into ``session``, at ``at``, on the authority it had
    since ``since`` (its run's start, or its claim of the job), all on one clock."""

    pid: str
    session: str
    since: float
    at: float
    what: str


def stale_effects(
    audit: list[tuple[str, str, str, float]], effects: list[Effect]
) -> list[tuple[Effect, str]]:
    """The effects written by a process that did not hold the session's lease throughout.

    One is stale when the latest lease take on its session at or before ``since`` was by
    another process, or another process took the lease after ``since`` and at or before
    ``at``: the writer's lease had run out and a delivery or a user turn elsewhere had the
    session. Lease takes are the audit's (every change of holder, on the database's clock).
    Returns each with the holder that took the session from it.
    """
    takes: dict[str, list[tuple[float, str]]] = {}
    for kind, key, holder, at in audit:
        if kind == "take":
            takes.setdefault(key, []).append((at, holder))
    found = []
    for effect in effects:
        timeline = sorted(takes.get(effect.session, []))
        before = [holder for at, holder in timeline if at <= effect.since]
        during = [holder for at, holder in timeline if effect.since < at <= effect.at]
        others = [h for h in before[-1:] + during if pid_of(h) != effect.pid]
        if not before or others:
            found.append((effect, others[0] if others else "nobody"))
    return found


async def _turns(app: App, runner: Recorder, sessions: list[str], stop: threading.Event) -> int:
    """User turns, a few sessions at a time round the ring, until ``stop``; how many ran."""
    ran = 0
    ring = itertools.cycle(sessions)
    while not stop.is_set():
        batch = list(dict.fromkeys(next(ring) for _ in range(4)))
        await asyncio.gather(
            *(app.run_turn_async(runner, user_id="u", session_id=s, text="hello") for s in batch)
        )
        ran += len(batch)
    return ran


async def _pause(session_id: str) -> None:
    await asyncio.sleep(0.02)  # a user turn holds its session a little while


def in_flight(lines: list[list[str]]) -> dict[str, float]:
    """The sessions a worker's log shows a delivery running on, with the run's start."""
    started = {(ln[2], float(ln[5])) for ln in log_kind(lines, "attempt")}
    ended = {(ln[2], float(ln[3])) for ln in log_kind(lines, "run")}
    return dict(started - ended)


def test_partitioned_host_never_writes_after_losing_its_claims(
    network: Network, tmp_path: Path
) -> None:
    """A host cut off mid-delivery: others take over; nothing lost, doubled, or overlapped.

    How the test tells, from the database and the logs:

    - lost: a job not ``delivered`` in the job table, or a call with no closing response
      row in the agent store;
    - doubled: a call with more than one closing response row in the agent store (it has no
      unique index to hide one);
    - overlaps: two runs on one session at once among the hosts never cut and the user
      turns (their logged run intervals and a ``flock`` per session). The cut host's runs
      are left out there: a run hung in the cut link still "runs" in its process while
      another takes the session, which is expected; what it must not do is write, below;
    - written after losing a claim (also an overlap with a user turn when a turn had the
      session): an agent-store row, or a job-table outcome (a claim ended as delivered,
      ready again, failed or orphaned: ``test_audit``'s ``outcome:`` rows, by the claim
      holder), by a process that did not hold the session's lease all the way from the
      start of its authority (its run's start; its claim of the job) to the moment the
      write landed: the latest lease take on the session before the start was another's,
      or another process took the lease in between (``test_audit``'s ``take`` rows, every
      change of a lease's holder, by a trigger). Times are the database's
      ``clock_timestamp()`` (one machine, one clock, so the run's start compares), so a
      write held up in the cut link counts when it landed, not when it was sent.
    """
    hosts, cluster = network.hosts, network.cluster
    url = cluster.create_database("longcall")
    agent_url = url  # the agent store honours the fence in longcall's own database
    AgentStore.create(agent_url)
    app, agent = build_app(url)
    turns_app, turns_agent = build_app(url)
    try:
        job_ids = asyncio.run(seed(app, agent, sessions=SESSIONS, turns=TURNS))
        total = len(job_ids)
        sessions = [f"s{s:03d}" for s in range(SESSIONS)]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(AUDIT)

        locks, go, stop = tmp_path / "locks", tmp_path / "go", tmp_path / "stop"
        locks.mkdir()
        logs = [tmp_path / f"host{i}.log" for i in range(HOSTS)]
        turns_log_path = tmp_path / "turns.log"
        with procs([]) as started:
            for i, log in enumerate(logs):
                host_url = cluster.url("longcall", host=hosts.gateway(i))
                host_agent_url = host_url
                flock = [] if i == CUT else ["--locks", str(locks)]
                started.append(
                    Proc(
                        host_url,
                        log,
                        "--mode", "worker",
                        "--agent-store", host_agent_url,
                        "--go-file", str(go),
                        "--stop-file", str(stop),
                        "--lease", str(LEASE),
                        "--think", str(THINK),
                        "--deliveries", "3",
                        "--batch", "3",
                        "--poll", "0.1",
                        "--max-seconds", "170",
                        *flock,
                        wrap=lambda argv, i=i: hosts.command(i, argv),
                    )
                )  # fmt: skip
            wait_for(lambda: len(log_kind(read_log(*logs), "ready")) == HOSTS, 60, "the workers")

            turns_stop = threading.Event()
            turns_log = LogFile(turns_log_path)
            turns_runner = Recorder(turns_agent, turns_log, locks=locks, pause_before=_pause)
            turns_ran: list[int] = []
            turns = threading.Thread(
                target=lambda: turns_ran.append(
                    asyncio.run(_turns(turns_app, turns_runner, sessions, turns_stop))
                ),
                name="user turns",
            )
            go.touch()
            began = time.time()
            turns.start()
            try:
                # Cut while the host has a delivery whose write is still to come (it began
                # less than a fifth of THINK ago), with a tenth of the jobs delivered.
                def cut_moment() -> bool:
                    lines = read_log(logs[CUT])
                    fresh = [t for t in in_flight(lines).values() if time.time() - t < THINK / 5]
                    return (
                        bool(fresh) and len(log_kind(read_log(*logs), "delivered")) >= total // 10
                    )

                wait_for(cut_moment, 60, "the host to be in the middle of a delivery", step=0.005)
                cut_at = hosts.cut(CUT)
                hung = in_flight(read_log(logs[CUT]))
                cut_pid = str(started[CUT].pid)
                assert hung, "the cut came between deliveries"

                # Heal once another host has claimed a job the cut host had claimed, and
                # another process has taken a session the cut host was delivering to.
                def taken_over() -> bool:
                    hung_taken = sql_rows(
                        url,
                        f"SELECT 1 FROM test_audit WHERE kind = 'take' AND at > {cut_at}"
                        f" AND key IN ({','.join(repr(s) for s in hung)})"
                        f" AND holder NOT LIKE '%:{cut_pid}:%' LIMIT 1",
                    )
                    return bool(hung_taken) and bool(
                        sql_rows(
                            url,
                            "SELECT 1 FROM test_audit a JOIN test_audit b ON a.key = b.key"
                            " WHERE a.kind = 'claim' AND b.kind = 'claim' AND b.at > a.at"
                            f" AND b.at > {cut_at} AND a.holder LIKE '%:{cut_pid}:%'"
                            f" AND b.holder NOT LIKE '%:{cut_pid}:%' LIMIT 1",
                        )
                    )

                wait_for(taken_over, 10 * LEASE * 3, "another host to take over a job")
                healed_at = hosts.heal(CUT)

                def drained() -> bool:
                    return app.store.counts() == {
                        (JobState.SUCCEEDED.value, Delivery.DELIVERED.value): total
                    }

                wait_for(drained, 120, "every job to be delivered")
                drained_at = time.time()
                # The cut host's hung runs end once the link carries their writes again.
                wait_for(
                    lambda: not set(hung) & set(in_flight(read_log(logs[CUT]))),
                    60,
                    "the cut host's hung deliveries to end",
                )
            finally:
                turns_stop.set()
                turns.join(60)
                turns_log.close()
            stop.touch()
            codes = [proc.wait(60) for proc in started]
            assert codes == [0] * HOSTS, [p.stderr() for p in started]
            for i, proc in enumerate(started):
                if i != CUT:
                    assert tracebacks(proc.stderr()) == [], proc.stderr()

        lines = read_log(*logs, turns_log_path)
        jobs = app.list_jobs(limit=10_000)
        calls = {job.call_id: job for job in jobs}
        session_of = {job.job_id: job.session_id for job in jobs}
        rows = agent_store_rows(agent_url)
        audit = [
            (k, key, h, float(at)) for k, key, h, at in sql_rows(url, "SELECT * FROM test_audit")
        ]
        pids = [str(p.pid) for p in started]

        # The figures.
        claims: dict[str, list[str]] = {}
        for kind, key, holder, _ in sorted(audit, key=lambda a: a[3]):
            if kind == "claim":
                claims.setdefault(key, []).append(pid_of(holder))
        takeovers = sum(
            1
            for seq in claims.values()
            if any(a == cut_pid and b != cut_pid for a, b in itertools.pairwise(seq))
        )
        stats = stats_of(lines)
        per_host = Counter(ln[1] for ln in log_kind(lines, "delivered"))
        print(
            f"\njobs {total} in {SESSIONS} sessions, hosts {HOSTS}, lease {LEASE}s, cuts 1;"
            f" host {CUT} (pid {cut_pid}) cut {healed_at - cut_at:.2f}s with"
            f" {len(hung)} deliveries in hand; takeovers {takeovers} jobs;"
            f" drained {drained_at - began:.2f}s after start, {drained_at - healed_at:.2f}s"
            f" after healing; user turns {sum(turns_ran)};"
            f" deliveries per host {[per_host[p] for p in pids]};"
            f" claim_lost {[stats.get(p, Counter())['claim_lost'] for p in pids]};"
            f" fence_lost {[stats.get(p, Counter())['fence_lost'] for p in pids]};"
            f" agent-store rows {len(rows)}"
        )

        # The cut caught deliveries in flight: runs begun before the cut whose writes were
        # still to come. Without fencing those writes landed after healing (9-19 late writes
        # a run, some of them second closing responses); with it, the cut host finds its
        # claims gone and stops (a write that landed late while it still held the session,
        # because the others waited for its lease, is not late: the check below says which).
        assert hung, "the cut caught no delivery in flight"
        assert stats.get(cut_pid, Counter())["fence_lost"] > 0, "the cut host never lost a fence"
        # Nothing lost.
        assert len(calls) == total
        assert {c for c, j in calls.items() if j.delivery is not Delivery.DELIVERED} == set()
        finals = Counter(r["call_id"] for r in rows if r["status"] in FINAL_STATUSES)
        assert set(calls) - set(finals) == set()
        # A takeover happened, and the user turns ran meanwhile.
        assert takeovers > 0
        assert sum(turns_ran) > 0
        assert len(log_kind(read_log(turns_log_path), "run")) == sum(turns_ran)
        # No two runs at once on a session among the hosts never cut and the user turns.
        not_cut = [ln for ln in lines if ln[1] != cut_pid]
        assert log_kind(not_cut, "overlap") == []
        assert overlapping_runs(not_cut) == []
        # Every agent-store write and job-table outcome landed while its writer held the
        # session: never after another process (a delivery or a user turn) had taken it.
        writes = [
            Effect(
                str(r["pid"]),
                r["session_id"],
                float(r["run_start"]),
                float(r["written_at"]),
                f"agent-store {r['call_id']}",
            )
            for r in rows
        ]
        claimed_at: dict[tuple[str, str], float] = {}
        outcomes = []
        for kind, key, holder, at in sorted(audit, key=lambda a: a[3]):
            if kind == "claim":
                claimed_at[key, holder] = at
            elif kind.startswith("outcome:"):
                since = claimed_at[key, holder]
                outcomes.append(Effect(pid_of(holder), session_of[key], since, at, f"{kind} {key}"))
        stale = stale_effects(audit, writes + outcomes)
        assert [s for s in stale if s[0].pid != cut_pid] == []
        doubled = {c: n for c, n in finals.items() if n != 1}
        print(
            f"late writes by the cut host: {sum(e.what.startswith('agent') for e, _ in stale)}"
            f" to the agent store, {sum(e.what.startswith('outcome') for e, _ in stale)} job-table"
            f" outcomes; calls with more than one closing response: {len(doubled)}"
        )
        for e, holder in sorted(stale, key=lambda s: s[0].at):
            landed = f"{e.at - healed_at:+.3f}s after healing"
            print(f"  {landed}: {e.what} in {e.session}, taken by {holder}")
        if stale or doubled:
            # A double that is not the cut host's late write is some other bug: fail plainly.
            late_calls = {e.what.split()[1] for e, _ in stale if e.what.startswith("agent-store")}
            assert set(doubled) <= late_calls, doubled
            raise LateWriteByCutHost(
                f"the cut host (pid {cut_pid}) wrote {len(stale)} times into sessions whose"
                f" leases others had taken (see the lines above); {len(doubled)} calls got a"
                " second closing response"
            )
    finally:
        turns_app.close()
        app.close()


# A host that holds a session lease's row lock in an open transaction, then stops sending:
# the link is cut between two statements of one of longcall's transactions.
HOLDER_SCRIPT = """
import sys, time
from pathlib import Path
from longcall.core.clock import SystemClock
from longcall.core.jobs import SessionKey
from longcall.store.postgres import PostgresStore

store = PostgresStore(sys.argv[1], SystemClock(), pool_size=1)
held = SessionKey("", "", "held")
assert store.take_session(held, "cut-host", kind="resume", ttl=1.0)

def work(tx):
    tx.run("renew_session_lease", **held.as_dict(), holder="cut-host", ttl=1.0, now=None)
    Path(sys.argv[2]).write_text("open")
    time.sleep(3600)

store._transact(work)
"""


def test_cut_host_open_transaction_does_not_block_other_hosts(
    network: Network, tmp_path: Path
) -> None:
    """A host cut off inside a transaction: the server ends it, and its locks, within seconds.

    Without that, the row locks of a transaction whose client vanished stay until the
    server's TCP gives up on the connection (hours with the default keepalives), and every
    other host's claim of that session waits on them, its whole claim transaction with it.
    """
    hosts, cluster = network.hosts, network.cluster
    url = cluster.create_database("longcall")
    app, _ = build_app(url)
    opened = tmp_path / "opened"
    script = [sys.executable, "-c", HOLDER_SCRIPT, cluster.url("longcall", host=hosts.gateway(0))]
    with (tmp_path / "holder.err").open("wb") as err:
        holder = subprocess.Popen(hosts.command(0, [*script, str(opened)]), stdout=err, stderr=err)
    try:
        wait_for(opened.exists, 60, "the cut host to open its transaction")
        cut_at = hosts.cut(0)
        # Its lease runs out (the renewal in the open transaction is not committed).
        expires_at = sql_rows(url, "SELECT expires_at FROM lc_session_leases")[0][0]
        wait_for(lambda: time.time() > expires_at + 0.05, 60, "the cut host's lease to run out")
        took: list[bool] = []
        taker = threading.Thread(
            target=lambda: took.append(
                app.store.take_session(
                    SessionKey("", "", "held"), "other-host", kind="turn", ttl=60
                )
            ),
            daemon=True,  # should the take hang, the test fails rather than hangs
        )
        taker.start()
        taker.join(60)
        waited = time.time() - cut_at
        print(f"\nanother host took the session {waited:.2f}s after the cut")
        assert took == [True], "another host's take of the session still waits"
        assert waited < 3 * parse_duration(IDLE_IN_TRANSACTION_TIMEOUT)
    finally:
        holder.kill()
        holder.wait(10)
        app.close()
