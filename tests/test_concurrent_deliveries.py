"""Concurrent deliveries: one worker delivers to many sessions at once, each still alone.

A real :class:`~longcall.worker.Worker` (or its deliverer's loop) runs in the test's event loop
against SQLite and PostgreSQL; jobs are made ready the way the outside world does (created,
attached to a call, completed), and :class:`Sessions`, an agent runner that sleeps as a model
would, records when each session's runs start and end, so overlaps and order can be counted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator

import pytest
from click.testing import CliRunner

import longcall
from longcall import CallIds, Delivery, JobState, Message, SessionKey
from longcall.agents import AgentEvent
from longcall.cli.main import main as cli_main
from longcall.jobs import delivery

# The head-of-line test's slow agent turn, and the safety net for the idle session's wait
# (measured: a few milliseconds to a few tens; see the printed figure).
SLOW_TURN = 3.0
PROMPT_BOUND = 1.5


class Sessions:
    """An agent runner that takes ``turn`` seconds per delivery (``slow`` per session), holds
    user turns until ``turns_open`` is set, and records every run per session."""

    app_name = "conc"

    def __init__(self, *, turn: float = 0.0, slow: dict[str, float] | None = None) -> None:
        self.turn = turn
        self.slow = slow or {}
        self.turns_open = asyncio.Event()
        self.active: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.running = 0
        self.peak_running = 0
        self.started: dict[str, float] = {}  # call id -> when its delivery began
        self.finished: dict[str, float] = {}  # call id -> when its delivery ended
        self.order: defaultdict[str, list[str]] = defaultdict(list)  # session -> call ids
        self.entered: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        self.active[session_id] += 1
        self.peak[session_id] = max(self.peak[session_id], self.active[session_id])
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        now = time.monotonic()
        calls = [r.id for r in message.function_responses]
        for call_id in calls:
            self.started[call_id] = now
            self.order[session_id].append(call_id)
        self.entered[session_id].set()
        try:
            if message.text is not None:
                await self.turns_open.wait()
            else:
                await asyncio.sleep(self.slow.get(session_id, self.turn))
            for call_id in calls:
                self.finished[call_id] = time.monotonic()
        finally:
            self.active[session_id] -= 1
            self.running -= 1
        if False:  # pragma: no cover - an async generator that says nothing
            yield AgentEvent(author="", invocation_id="")

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        return call_id in self.finished


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


def export_tool(app: longcall.App) -> longcall.LongRunningTool:
    @app.long_running
    def export(n: int) -> str:
        """Exports data set n."""
        return "started"

    return export


async def ready_job(
    app: longcall.App, export: longcall.LongRunningTool, session_id: str, n: int
) -> str:
    """A job for call ``c-<n>`` of ``session_id``, completed: ready to be delivered. Each job
    is its own invocation, so each is its own message (and its own place in the order)."""
    job_id = str((await asyncio.to_thread(export.invoke, {"n": n}))["jobId"])
    ids = CallIds("conc", "u", session_id, f"c-{n}", f"inv-{n}")
    await app.attach_async(job_id, ids)
    assert (await app.complete_async(job_id, {"n": n})).changed
    return job_id


async def until(predicate: object, what: str, seconds: float = 60.0) -> None:
    assert callable(predicate)
    give_up = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def all_delivered(app: longcall.App, job_ids: list[str]) -> None:
    async def done() -> bool:
        jobs = [await app.get_job_async(j) for j in job_ids]
        return all(j.delivery is Delivery.DELIVERED for j in jobs)

    give_up = time.monotonic() + 60
    while not await done():
        assert time.monotonic() < give_up, "timed out waiting for every delivery"
        await asyncio.sleep(0.02)


# -- head of line -------------------------------------------------------------------------


@pytest.mark.parametrize("completed_by", ["this app", "another app"])
def test_an_idle_session_is_delivered_while_another_session_s_turn_runs(
    db_url: str, app: longcall.App, completed_by: str
) -> None:
    """A completion for an idle session is delivered promptly during another's 3 s turn."""
    export = export_tool(app)
    agent = Sessions(slow={"slow": SLOW_TURN})
    # Another App stands for the server in another process: on PostgreSQL its commit wakes
    # the worker by NOTIFY; on SQLite the worker finds it at its next poll.
    other = longcall.App(db_url) if completed_by == "another app" else app
    if other is not app:
        export_tool(other)
    worker = app.worker(agent, poll_interval="0.25s")

    async def scenario() -> float:
        running = asyncio.create_task(worker.run(handle_signals=False))
        await ready_job(app, export, "slow", 1)
        await asyncio.wait_for(agent.entered["slow"].wait(), 30)
        sent = time.monotonic()
        await ready_job(other, other.tools["export"], "idle", 2)
        await asyncio.wait_for(agent.entered["idle"].wait(), 30)
        waited = agent.started["c-2"] - sent
        assert "c-1" not in agent.finished, "the slow turn ended first: nothing was measured"
        worker.stop()
        await asyncio.wait_for(running, 30)
        return waited

    try:
        waited = asyncio.run(scenario())
    finally:
        if other is not app:
            other.close()
    print(
        f"\nhead of line ({app.store.dialect}, completed by {completed_by}): the idle "
        f"session's delivery began {waited * 1000:.0f} ms after its completion, during a "
        f"{SLOW_TURN:.0f} s turn of another session"
    )
    assert waited < PROMPT_BOUND
    assert agent.order == {"slow": ["c-1"], "idle": ["c-2"]}


# -- per session: one at a time, in order ------------------------------------------------


def test_sessions_run_side_by_side_but_each_one_at_a_time_in_order(app: longcall.App) -> None:
    """Many jobs over a few sessions: sessions overlap, no session's runs do, order holds."""
    export = export_tool(app)
    agent = Sessions(turn=0.03)
    worker = app.worker(agent, deliveries=8, poll_interval="0.25s")
    sessions = [f"s{k}" for k in range(4)]

    async def scenario() -> tuple[list[str], dict[str, list[str]]]:
        running = asyncio.create_task(worker.run(handle_signals=False))
        job_ids, expected = [], defaultdict(list)
        # Completions keep arriving while deliveries run, interleaved over the sessions.
        for n in range(40):
            session_id = sessions[n % len(sessions)]
            job_ids.append(await ready_job(app, export, session_id, n))
            expected[session_id].append(f"c-{n}")
            if n % 5 == 4:
                await asyncio.sleep(0.02)
        await all_delivered(app, job_ids)
        worker.stop()
        await asyncio.wait_for(running, 30)
        return job_ids, dict(expected)

    _, expected = asyncio.run(scenario())
    assert dict(agent.peak) == {s: 1 for s in sessions}, "two runs overlapped in a session"
    assert dict(agent.order) == expected
    assert agent.peak_running > 1, "the sessions were never delivered side by side"
    assert Counter(c for calls in agent.order.values() for c in calls) == Counter(
        f"c-{n}" for n in range(40)
    )
    assert worker.deliverer is not None
    assert worker.deliverer.stats["delivered"] == 40


def test_never_more_deliveries_in_flight_than_the_bound(app: longcall.App) -> None:
    """With deliveries=3 and 12 ready sessions, exactly 3 run at once, never more."""
    export = export_tool(app)
    agent = Sessions(turn=0.2)
    worker = app.worker(agent, deliveries=3, poll_interval="0.25s")

    async def scenario() -> None:
        job_ids = [await ready_job(app, export, f"s{n}", n) for n in range(12)]
        running = asyncio.create_task(worker.run(handle_signals=False))
        await all_delivered(app, job_ids)
        worker.stop()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    assert agent.peak_running == 3
    assert len(agent.finished) == 12


def test_the_bound_must_be_at_least_one(app: longcall.App) -> None:
    """deliveries=0 (or not a whole number) is refused with an error naming it."""
    agent = Sessions()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match=r"deliveries .* at least 1"):
            app.worker(agent, deliveries=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"deliveries .* at least 1"):
            app.deliverer(agent, deliveries=bad)
    for command in ("worker", "serve"):
        result = CliRunner().invoke(cli_main, [command, "--app", "x:y", "--deliveries", "0"])
        assert result.exit_code == 2
        assert "Invalid value for '--deliveries': 0 is not in the range 1<=x" in result.output


# -- stopping ------------------------------------------------------------------------------


def test_sigterm_drains_every_delivery_in_flight(app: longcall.App) -> None:
    """SIGTERM while five sessions' turns run: all five finish and are marked; the second
    message of a session is given back, not started; no lease or claim is left behind."""
    export = export_tool(app)
    agent = Sessions(turn=1.0)
    worker = app.worker(agent, poll_interval="0.25s", drain_timeout="30s")

    async def scenario() -> tuple[list[str], str, float]:
        first = [await ready_job(app, export, f"s{n}", n) for n in range(5)]
        second = await ready_job(app, export, "s0", 99)  # s0's next message, same claim
        running = asyncio.create_task(worker.run())
        await until(lambda: agent.running == 5, "five deliveries in flight")
        sent = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(running, 30)
        return first, second, time.monotonic() - sent

    first, second, took = asyncio.run(scenario())
    assert took < 10
    for job_id in first:
        job = app.get_job(job_id)
        assert job.state is JobState.SUCCEEDED
        assert job.delivery is Delivery.DELIVERED
    given_back = app.get_job(second)
    assert given_back.delivery is Delivery.READY
    assert "c-99" not in agent.started
    assert sorted(agent.finished) == [f"c-{n}" for n in range(5)]
    for n in range(5):  # every session lease was released: another holder takes it at once
        assert app.store.take_session(
            SessionKey("conc", "u", f"s{n}"), "someone-else", kind="turn", ttl=5
        )


# -- user turns ----------------------------------------------------------------------------


def test_a_user_turn_holding_its_session_is_never_overlapped(app: longcall.App) -> None:
    """While a user turn runs in s1, s1's completion waits and s2's is delivered at once."""
    export = export_tool(app)
    agent = Sessions(turn=0.01)
    worker = app.worker(agent, poll_interval="0.1s")

    async def scenario() -> None:
        running = asyncio.create_task(worker.run(handle_signals=False))
        turn = asyncio.create_task(
            app.run_turn_async(agent, user_id="u", session_id="s1", text="hello")
        )
        await asyncio.wait_for(agent.entered["s1"].wait(), 30)
        waiting = await ready_job(app, export, "s1", 1)
        prompt = await ready_job(app, export, "s2", 2)
        await all_delivered(app, [prompt])
        await asyncio.sleep(0.5)  # the worker polls and claims several times meanwhile
        assert (await app.get_job_async(waiting)).delivery is Delivery.READY
        assert "c-1" not in agent.started
        agent.turns_open.set()
        await asyncio.wait_for(turn, 30)
        await all_delivered(app, [waiting])
        worker.stop()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    assert agent.peak["s1"] == 1
    assert agent.order["s1"] == ["c-1"]


def test_a_session_claimed_again_mid_delivery_waits_for_it(app: longcall.App) -> None:
    """If a session's lease is lost while its delivery runs and the same worker claims the
    session again, the new jobs wait for the delivery in hand: never two runs in a session.
    The claim raised the session's fence, so the delivery in hand has lost it: its heartbeat
    cuts it short, and its job, once its claim runs out, is delivered again (after the
    newer job, which was ready first)."""
    export = export_tool(app)
    agent = Sessions(slow={"s1": 1.0})
    worker = app.worker(agent, lease="0.6s", poll_interval="0.05s")
    assert worker.deliverer is not None
    holder = worker.deliverer.holder

    async def scenario() -> None:
        running = asyncio.create_task(worker.run(handle_signals=False))
        first = await ready_job(app, export, "s1", 1)
        await asyncio.wait_for(agent.entered["s1"].wait(), 30)
        # The lease goes as one that ran out would (a stalled heartbeat); this worker is
        # free to claim the session again, and does once s1 has a new ready job.
        await app.in_thread(app.store.release_session, SessionKey("conc", "u", "s1"), holder)
        second = await ready_job(app, export, "s1", 2)
        await all_delivered(app, [first, second])
        worker.stop()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    assert agent.peak["s1"] == 1
    assert agent.order["s1"][0] == "c-1"
    assert set(agent.order["s1"]) == {"c-1", "c-2"}
    assert worker.deliverer.stats["fence_lost"] == 1


def heartbeat_held_at_stop(call_id: str, held_open: asyncio.Event) -> type[delivery._Heartbeat]:
    """A delivery heartbeat that, for the delivery of ``call_id``, holds its task at its end
    (after its last commit released the session's lease) until ``held_open`` is set."""

    class HeartbeatHeldAtStop(delivery._Heartbeat):
        async def stop(self) -> None:
            await super().stop()
            if self._jobs[0].call_id == call_id:
                await held_open.wait()

    return HeartbeatHeldAtStop


def test_a_session_claimed_between_its_release_and_the_delivery_s_end_is_not_stuck(
    app: longcall.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A delivery's last commit releases its session's lease a moment before its task ends;
    a claim in that moment takes the lease again and gives its jobs back. The delivery in
    hand then releases that lease as it ends, so the given-back job goes out at once rather
    than when the lease runs out (60 s, the default here)."""
    export = export_tool(app)
    agent = Sessions()
    worker = app.worker(agent, poll_interval="0.05s")
    assert worker.deliverer is not None
    held_open = asyncio.Event()  # bound to the scenario's loop on first use

    # Holds the first delivery of s1 in the moment after its lease was released.
    monkeypatch.setattr(delivery, "_Heartbeat", heartbeat_held_at_stop("c-1", held_open))
    caplog.set_level(logging.INFO, logger="longcall.delivery")

    async def scenario() -> float:
        running = asyncio.create_task(worker.run(handle_signals=False))
        first = await ready_job(app, export, "s1", 1)
        await all_delivered(app, [first])  # its lease is released; its task has not ended
        second = await ready_job(app, export, "s1", 2)
        await until(
            lambda: any("claimed again" in r.getMessage() for r in caplog.records),
            "the worker to claim s1 again while its first delivery is in flight",
        )
        assert "c-2" not in agent.started, "a second delivery began inside the first"
        held_open.set()
        released = time.monotonic()
        await all_delivered(app, [second])
        waited = time.monotonic() - released
        worker.stop()
        await asyncio.wait_for(running, 30)
        return waited

    waited = asyncio.run(scenario())
    print(f"\ngiven-back job delivered {waited * 1000:.0f} ms after the first delivery ended")
    assert waited < 10, f"the session's lease sat until it ran out ({waited:.1f} s)"
    assert agent.peak["s1"] == 1
    assert agent.order["s1"] == ["c-1", "c-2"]


def test_a_delivery_ending_while_a_newer_claim_gives_back_does_not_strand_its_jobs(
    app: longcall.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As above, but the delivery in hand ends while the newer claim is still giving its jobs
    back. Its release must not free the lease that claim took (the give-back is checked
    against it): the given-back job would stay claimed until its claim ran out (60 s)."""
    export = export_tool(app)
    agent = Sessions()
    worker = app.worker(agent, poll_interval="0.05s")
    deliverer = worker.deliverer
    assert deliverer is not None
    held_open = asyncio.Event()

    give_back = deliverer._give_back

    async def give_back_after_the_first_delivery_ended(jobs: list[longcall.Job]) -> None:
        if jobs[0].call_id == "c-2" and not held_open.is_set():
            held_open.set()  # the first delivery runs to its end now, before the give-back
            await until(
                lambda: not any(t.get_name().startswith("deliver ") for t in asyncio.all_tasks()),
                "the first delivery's task to end",
            )
        await give_back(jobs)

    monkeypatch.setattr(delivery, "_Heartbeat", heartbeat_held_at_stop("c-1", held_open))
    monkeypatch.setattr(deliverer, "_give_back", give_back_after_the_first_delivery_ended)
    caplog.set_level(logging.INFO, logger="longcall.delivery")

    async def scenario() -> float:
        running = asyncio.create_task(worker.run(handle_signals=False))
        first = await ready_job(app, export, "s1", 1)
        await all_delivered(app, [first])
        second = await ready_job(app, export, "s1", 2)
        await until(lambda: held_open.is_set(), "the worker to claim s1 again and give it back")
        released = time.monotonic()
        await all_delivered(app, [second])
        waited = time.monotonic() - released
        worker.stop()
        await asyncio.wait_for(running, 30)
        return waited

    waited = asyncio.run(scenario())
    assert waited < 10, f"the given-back job sat until its claim ran out ({waited:.1f} s)"
    assert agent.peak["s1"] == 1
    assert agent.order["s1"] == ["c-1", "c-2"]
