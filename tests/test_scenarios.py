"""The job table's failure modes, end to end, on SQLite and on PostgreSQL.

Each scenario drives real user turns through a scripted agent, sends completions the way the
outside world does (twice, late, early, racing), runs resumers and sweepers, and counts what
the agent received: transitions, messages, function responses per call id, overlapping runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import longcall
from longcall import Delivery, JobState, Message
from longcall.jobs.delivery import response_of
from longcall.jobs.dispatcher import Dispatcher
from longcall.jobs.sweeper import Sweeper

FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})
EXPORT_RULE = longcall.Rule(r"export (\d+)", calls=[("export", lambda m: {"n": int(m[1])})])


# -- instruments ---------------------------------------------------------------------------


class Tally:
    """What runners received, shared by every runner of a test, whatever thread runs them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[tuple[str, Message]] = []
        self.active: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def enter(self, session_id: str, message: Message) -> None:
        with self.lock:
            self.messages.append((session_id, message))
            self.active[session_id] += 1
            self.peak[session_id] = max(self.peak[session_id], self.active[session_id])

    def leave(self, session_id: str) -> None:
        with self.lock:
            self.active[session_id] -= 1

    def response_messages(self, session_id: str | None = None) -> list[Message]:
        """Messages of function responses (resumes), in the order the runners got them."""
        with self.lock:
            return [
                m
                for s, m in self.messages
                if m.function_responses and (session_id is None or s == session_id)
            ]

    def finals(self) -> Counter[str]:
        """How many closing responses each call id was handed."""
        return Counter(
            r.id
            for m in self.response_messages()
            for r in m.function_responses
            if r.response.get("status") in FINAL_STATUSES
        )

    def max_overlap(self) -> int:
        with self.lock:
            return max(self.peak.values(), default=0)


class Recording:
    """An AgentRunner wrapper that records every message and how many runs overlap."""

    def __init__(
        self,
        inner: longcall.ScriptedAgent,
        tally: Tally | None = None,
        *,
        delay: float = 0.0,
        fail_with: Callable[[], Exception] | None = None,
        before: Callable[[Message], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = inner
        self.before = before
        self.app_name = inner.app_name
        self.tally = tally or Tally()
        self.delay = delay
        self.fail_with = fail_with

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[longcall.AgentEvent]:
        self.tally.enter(session_id, message)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.before is not None:
                await self.before(message)
            if self.fail_with is not None and message.function_responses:
                raise self.fail_with()
            async for event in self.inner.run(
                user_id=user_id, session_id=session_id, message=message
            ):
                yield event
        finally:
            self.tally.leave(session_id)

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        return await self.inner.has_function_response(
            user_id=user_id, session_id=session_id, call_id=call_id
        )


class ResumerThread:
    """A resumer on its own thread and event loop until told to stop.

    ``loop="run"`` runs :meth:`Deliverer.run` (wake-ups and polling, as a worker does);
    ``loop="passes"`` calls :meth:`Deliverer.run_once` back to back.
    """

    def __init__(
        self, app: longcall.App, runner: Any, *, loop: str = "run", **options: Any
    ) -> None:
        options.setdefault("poll_interval", 0.05)
        self.deliverer = app.deliverer(runner, **options)
        self.loop = loop
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="test-resumer")

    def _main(self) -> None:
        try:
            asyncio.run(self._run() if self.loop == "run" else self._passes())
        except BaseException as exc:
            self.error = exc

    async def _run(self) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(self.deliverer.run(stop))
        await asyncio.to_thread(self.stop.wait)
        stop.set()
        await task

    async def _passes(self) -> None:
        while not self.stop.is_set():
            if not await self.deliverer.run_once():
                await asyncio.sleep(0.005)

    def __enter__(self) -> ResumerThread:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the resumer thread did not stop"
        if self.error is not None:
            raise self.error


class Gate:
    """Holds the scripted model's reply until opened, which makes one user turn slow."""

    def __init__(self) -> None:
        self.armed = False
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    async def think(self) -> None:
        if self.armed:
            self.entered.set()
            await self.opened.wait()

    def open(self) -> None:
        self.armed = False
        self.opened.set()


def wait_until(predicate: Callable[[], bool], *, timeout: float = 60.0, what: str = "") -> None:
    """Poll ``predicate`` from a plain thread until it holds."""
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.02)


async def wait_until_async(
    predicate: Callable[[], Awaitable[bool]], *, seconds: float = 60.0, what: str = ""
) -> None:
    """Poll ``predicate`` from the event loop until it holds."""
    for _ in range(int(seconds / 0.02)):
        if await predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or predicate}")


async def session_finals(agent: longcall.ScriptedAgent, session_id: str) -> Counter[str]:
    """Closing function responses per call id, as the session's history holds them."""
    return Counter(
        r.id
        for event in await agent.history(session_id)
        if event.author == "user"
        for r in event.function_responses
        if r.response.get("status") in FINAL_STATUSES
    )


def delivered_count(app: longcall.App) -> int:
    return sum(n for (_, delivery), n in app.store.counts().items() if delivery == "delivered")


def export_id(n: int, user: str | None = "u1") -> str:
    """The id of export job ``n`` started by ``user`` (the key in that user's namespace)."""
    return longcall.job_id_for(f"export:{n}", user)


def register_export(app: longcall.App, **options: Any) -> longcall.LongRunningTool:
    @app.long_running(key="export:{n}", **options)
    def export(n: int) -> str:
        """Exports data set n."""
        return f"Export {n} started."

    return export


async def start_jobs(
    app: longcall.App, runner: Recording, *, sessions: int, per_session: int
) -> list[str]:
    """Real user turns, sessions side by side, each turn starting one export job."""

    async def one_session(i: int) -> None:
        for j in range(per_session):
            await app.run_turn_async(
                runner,
                user_id=f"user-{i}",
                session_id=f"session-{i}",
                text=f"export {i * per_session + j}",
            )

    await asyncio.gather(*(one_session(i) for i in range(sessions)))
    return [export_id(n, f"user-{n // per_session}") for n in range(sessions * per_session)]


def pg_small_pool(url: str) -> str:
    """Separate apps on PostgreSQL share one server: keep each pool small."""
    return f"{url}?pool_size=4" if url.startswith("postgresql") else url


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


@pytest.fixture
def clock() -> longcall.FakeClock:
    return longcall.FakeClock()


@pytest.fixture
def fake_app(db_url: str, clock: longcall.FakeClock) -> Iterator[longcall.App]:
    with longcall.App(db_url, clock=clock) as app:
        yield app


# -- 1. duplicate completions at scale -----------------------------------------------------


def test_duplicate_completions_from_threads_deliver_each_job_once(
    app: longcall.App,
) -> None:
    """1,000 jobs, each completed 5 times from 4 threads: 1,000 transitions and deliveries."""
    sessions, per_session, copies = 50, 20, 5
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    tally = Tally()
    runner = Recording(agent, tally)
    job_ids = asyncio.run(start_jobs(app, runner, sessions=sessions, per_session=per_session))
    assert len(job_ids) == 1000
    assert app.store.counts() == {("started", "none"): 1000}

    sends = [job_id for job_id in job_ids for _ in range(copies)]
    random.Random(7).shuffle(sends)
    shards = [sends[i::4] for i in range(4)]

    def send(shard: list[str]) -> list[bool]:
        return [
            app.complete(job_id, {"rows": int(job_id.split(":")[1].split("@")[0])}).changed
            for job_id in shard
        ]

    with (
        ResumerThread(app, runner, holder="resumer-a", loop="run") as first,
        ResumerThread(app, runner, holder="resumer-b", loop="passes") as second,
    ):
        with ThreadPoolExecutor(max_workers=4) as senders:
            outcomes = [changed for shard in senders.map(send, shards) for changed in shard]
        wait_until(lambda: delivered_count(app) == 1000, what="1,000 deliveries")

    assert len(outcomes) == 5000
    assert outcomes.count(True) == 1000
    assert outcomes.count(False) == 4000
    assert app.store.counts() == {("succeeded", "delivered"): 1000}
    delivered_by_resumers = first.deliverer.stats["delivered"] + second.deliverer.stats["delivered"]
    assert delivered_by_resumers == 1000

    finals = tally.finals()
    assert len(finals) == 1000
    assert set(finals.values()) == {1}
    assert len(tally.response_messages()) == 1000
    assert tally.max_overlap() == 1

    async def histories() -> Counter[str]:
        total: Counter[str] = Counter()
        for i in range(sessions):
            total.update(await session_finals(agent, f"session-{i}"))
        return total

    in_sessions = asyncio.run(histories())
    assert len(in_sessions) == 1000
    assert set(in_sessions.values()) == {1}
    kinds = Counter(e.kind for job_id in job_ids[::50] for e in app.job_events(job_id))
    assert kinds == {"succeeded": 20, "ignored": 80}


# -- 2. conflicting terminal results -------------------------------------------------------


def test_conflicting_terminal_results_first_commit_wins(app: longcall.App) -> None:
    """complete, fail and cancel racing: one winner per job, no flip, every loser unchanged."""
    n_jobs = 150

    @app.long_running(key="job:{n}")
    def work(n: int) -> None:
        """Works."""

    for n in range(n_jobs):
        work.invoke({"n": n})
    job_ids = [f"job:{n}" for n in range(n_jobs)]

    actions: dict[str, Callable[[str], longcall.FinishOutcome]] = {
        "complete": lambda job_id: app.complete(job_id, {"by": "complete"}),
        "fail": lambda job_id: app.fail(job_id, {"by": "fail"}),
        "cancel": lambda job_id: app.cancel(job_id, "by cancel"),
    }
    racers = [name for name in actions for _ in range(2)]
    barrier = threading.Barrier(len(racers))

    def race(name: str) -> list[tuple[str, str, bool, JobState]]:
        barrier.wait(timeout=30)
        results = []
        for job_id in job_ids:
            outcome = actions[name](job_id)
            results.append((job_id, name, outcome.changed, outcome.job.state))
        return results

    flips: list[str] = []
    seen: dict[str, JobState] = {}
    watching = threading.Event()
    reads = 0

    def watch() -> None:
        nonlocal reads
        while not watching.is_set():
            for job in app.list_jobs(limit=n_jobs):
                if job.terminal and seen.setdefault(job.job_id, job.state) is not job.state:
                    flips.append(job.job_id)
            reads += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=len(racers)) as pool:
            results = [row for rows in pool.map(race, racers) for row in rows]
    finally:
        watching.set()
        watcher.join(timeout=60)

    expected_state = {
        "complete": JobState.SUCCEEDED,
        "fail": JobState.FAILED,
        "cancel": JobState.CANCELLED,
    }
    expected_result = {
        "complete": {"by": "complete"},
        "fail": {"by": "fail"},
        "cancel": {"message": "by cancel"},
    }
    assert len(results) == n_jobs * len(racers)
    assert sum(changed for _, _, changed, _ in results) == n_jobs
    assert sum(not changed for _, _, changed, _ in results) == n_jobs * (len(racers) - 1)
    for job_id in job_ids:
        mine = [r for r in results if r[0] == job_id]
        winners = [r for r in mine if r[2]]
        assert len(winners) == 1, job_id
        winner_state = expected_state[winners[0][1]]
        assert winners[0][3] is winner_state
        # Every loser saw the winner's state, not its own.
        assert {state for _, _, changed, state in mine if not changed} == {winner_state}
        job = app.get_job(job_id)
        assert job.state is winner_state
        assert job.result == expected_result[winners[0][1]]
        kinds = [e.kind for e in app.job_events(job_id)]
        assert kinds == [winner_state.value] + ["ignored"] * (len(racers) - 1)
    assert reads > 0
    assert flips == []
    wins = Counter(expected_state[name] for _, name, changed, _ in results if changed)
    assert Counter(job.state for job in app.list_jobs(limit=n_jobs)) == wins


# -- 3. completion before attach -----------------------------------------------------------


def test_completion_before_attach_is_delivered_once_after_attach(app: longcall.App) -> None:
    """A result that arrives before the call is attached waits, then is delivered exactly once."""
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE], record_join=False)
    runner = Recording(agent)

    # Without the join the tool knows no user: its job has the bare key, as in library use.
    unjoined = export_id(7, None)

    async def scenario() -> None:
        resumer = app.deliverer(runner)
        async with app.session_turn("s1", app_name=runner.app_name, user_id="u1"):
            events = [
                e
                async for e in runner.run(
                    user_id="u1", session_id="s1", message=Message(text="export 7")
                )
            ]
        (call,) = [c for e in events for c in e.function_calls]
        job = await app.get_job_async(unjoined)
        assert not job.attached
        assert job.session_id is None and job.call_id is None

        outcome = await app.complete_async(unjoined, {"rows": 7})
        assert outcome.changed
        assert outcome.job.delivery is Delivery.NONE
        for _ in range(3):
            assert await resumer.run_once() == 0
        assert runner.tally.response_messages() == []
        assert (await app.get_job_async(unjoined)).delivery is Delivery.NONE

        observer = app.call_observer(app_name=agent.app_name, user_id="u1", session_id="s1")
        await observer.observe_all(events)
        assert observer.attached == [unjoined]
        job = await app.get_job_async(unjoined)
        assert job.delivery is Delivery.READY
        assert (job.session_id, job.call_id) == ("s1", call.id)

        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        (message,) = runner.tally.response_messages()
        (response,) = message.function_responses
        assert (response.id, response.name) == (call.id, "export")
        assert response.response == {
            "status": "succeeded",
            "jobId": unjoined,
            "result": {"rows": 7},
        }
        assert await session_finals(agent, "s1") == {call.id: 1}

    asyncio.run(scenario())
    assert app.get_job(unjoined).delivery is Delivery.DELIVERED


def test_completion_inside_the_tool_call_is_delivered_after_the_turn(app: longcall.App) -> None:
    """Work that finishes before the tool returns is delivered once, only after the turn."""

    @app.long_running(key="quick:{n}")
    def quick(n: int, job: longcall.JobHandle) -> str:
        """Finishes at once."""
        app.complete(job.id, {"n": n})
        return "started"

    rule = longcall.Rule(r"quick (\d+)", calls=[("quick", lambda m: {"n": int(m[1])})])
    agent = longcall.ScriptedAgent(app, rules=[rule], record_join=False)
    runner = Recording(agent)
    resumer = app.deliverer(runner)
    in_turn = False
    during_turn: list[int] = []

    async def think() -> None:
        jobs = await app.list_jobs_async()
        if in_turn and jobs and jobs[0].attached:
            during_turn.append(await resumer.run_once())

    agent.think = think

    async def scenario() -> None:
        nonlocal in_turn
        in_turn = True
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="quick 1")
        in_turn = False
        job = await app.get_job_async("quick:1")
        assert job.state is JobState.SUCCEEDED
        assert job.delivery is Delivery.READY
        assert runner.tally.response_messages() == []
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0

    asyncio.run(scenario())
    assert during_turn == [0]
    assert len(runner.tally.response_messages()) == 1
    assert runner.tally.finals() == {app.get_job("quick:1").call_id: 1}
    assert app.get_job("quick:1").delivery is Delivery.DELIVERED


# -- 4. resume during a user turn ----------------------------------------------------------


def test_resume_waits_for_the_user_turn_and_never_interleaves(db_url: str) -> None:
    """A completion during a slow user turn is resumed after it, by a resumer elsewhere."""
    tally = Tally()
    gate = Gate()

    with (
        longcall.App(db_url) as app,
        longcall.App(pg_small_pool(db_url)) as other,
    ):
        register_export(app)
        agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE], think=gate.think)
        runner = Recording(agent, tally)
        remote_agent = longcall.ScriptedAgent(other, rules=[EXPORT_RULE])

        async def scenario() -> None:
            await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 1")
            gate.armed = True
            turn = asyncio.create_task(
                app.run_turn_async(runner, user_id="u1", session_id="s1", text="and the weather?")
            )
            await asyncio.wait_for(gate.entered.wait(), 30)
            assert (await app.complete_async(export_id(1), {"rows": 1})).changed
            with ResumerThread(other, Recording(remote_agent, tally)) as remote:
                await asyncio.sleep(0.5)  # the resumer passes many times meanwhile
                job = await app.get_job_async(export_id(1))
                assert job.delivery is Delivery.READY
                assert job.attempts == 0
                assert tally.response_messages() == []
                assert remote.deliverer.stats["delivered"] == 0
                gate.open()
                await turn

                async def delivered() -> bool:
                    job = await app.get_job_async(export_id(1))
                    return job.delivery is Delivery.DELIVERED

                await wait_until_async(delivered, seconds=30, what="the resume")
            assert remote.deliverer.stats["delivered"] == 1

        asyncio.run(scenario())
        history = asyncio.run(agent.history("s1"))

    (inv_a,) = {e.invocation_id for e in history if e.text == "export 1"}
    (inv_b,) = {e.invocation_id for e in history if e.text == "and the weather?"}
    order = [e.invocation_id for e in history]
    assert order == [inv_a] * 4 + [inv_b] * 2 + [inv_a] * 2
    resume_events = history[6:]
    assert resume_events[0].author == "user"
    assert resume_events[0].function_responses[0].response["status"] == "succeeded"
    assert tally.max_overlap() == 1
    assert len(tally.response_messages()) == 1


def test_user_turn_waits_for_a_resume_in_progress(app: longcall.App) -> None:
    """A user turn that starts while a resume runs waits for it; nothing interleaves."""
    register_export(app)
    gate = Gate()
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE], think=gate.think)
    tally = Tally()
    runner = Recording(agent, tally)

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 1")
        assert (await app.complete_async(export_id(1), {"rows": 1})).changed
        gate.armed = True
        resume = asyncio.create_task(app.deliverer(runner).run_once())
        await asyncio.wait_for(gate.entered.wait(), 30)  # the resume is mid-run
        turn = asyncio.create_task(
            app.run_turn_async(runner, user_id="u1", session_id="s1", text="and the weather?")
        )
        await asyncio.sleep(0.5)
        assert not turn.done()
        assert [m.text for _, m in tally.messages if m.text] == ["export 1"]
        gate.open()
        assert await resume == 1
        await asyncio.wait_for(turn, 30)

    asyncio.run(scenario())
    history = asyncio.run(agent.history("s1"))
    (inv_a,) = {e.invocation_id for e in history if e.text == "export 1"}
    (inv_b,) = {e.invocation_id for e in history if e.text == "and the weather?"}
    assert [e.invocation_id for e in history] == [inv_a] * 6 + [inv_b] * 2
    assert history[4].function_responses[0].response["status"] == "succeeded"
    assert tally.max_overlap() == 1
    assert app.get_job(export_id(1)).delivery is Delivery.DELIVERED


# -- 5. racing resumers --------------------------------------------------------------------


@pytest.mark.parametrize("n_resumers", [2, 4])
def test_racing_resumers_deliver_once_and_never_overlap(db_url: str, n_resumers: int) -> None:
    """2 or 4 resumers in threads, each its own App: 0 double deliveries, 0 overlapping runs."""
    sessions, per_session = 12, 10
    tally = Tally()
    with longcall.App(db_url) as app:
        register_export(app)
        agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
        job_ids = asyncio.run(
            start_jobs(app, Recording(agent, tally), sessions=sessions, per_session=per_session)
        )
        with contextlib.ExitStack() as stack:
            apps = [
                stack.enter_context(longcall.App(pg_small_pool(db_url))) for _ in range(n_resumers)
            ]
            threads = [
                stack.enter_context(
                    ResumerThread(
                        other,
                        Recording(longcall.ScriptedAgent(other), tally, delay=0.002),
                        holder=f"resumer-{i}",
                        loop="run" if i % 2 else "passes",
                        batch=8,
                    )
                )
                for i, other in enumerate(apps)
            ]
            for job_id in job_ids:
                app.complete(job_id, {"ok": job_id})
            wait_until(lambda: delivered_count(app) == len(job_ids), what="all deliveries")

        async def histories() -> Counter[str]:
            total: Counter[str] = Counter()
            for i in range(sessions):
                total.update(await session_finals(agent, f"session-{i}"))
            return total

        in_sessions = asyncio.run(histories())
        counts = app.store.counts()

    assert counts == {("succeeded", "delivered"): sessions * per_session}
    finals = tally.finals()
    assert len(finals) == sessions * per_session
    assert set(finals.values()) == {1}
    assert len(in_sessions) == sessions * per_session
    assert set(in_sessions.values()) == {1}
    assert sum(t.deliverer.stats["delivered"] for t in threads) == sessions * per_session
    assert tally.max_overlap() == 1


@pytest.mark.parametrize("stored_before_crash", [True, False])
def test_crashed_resumer_lease_runs_out_and_the_job_is_delivered_once(
    fake_app: longcall.App, clock: longcall.FakeClock, stored_before_crash: bool
) -> None:
    """A claim left by a crashed resumer expires; the job reaches the session exactly once."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    runner = Recording(agent)

    async def scenario() -> longcall.Deliverer:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 8")
        await app.complete_async(export_id(8), {"rows": 8})
        (claimed,) = await app.in_thread(app.store.claim, "crashed", limit=10, lease=60)
        if stored_before_crash:  # the agent took the response; marking it was lost
            message = Message(function_responses=(response_of(claimed),))
            async for _ in agent.run(user_id="u1", session_id="s1", message=message):
                pass
        resumer = app.deliverer(runner)
        clock.advance(59)
        assert await resumer.run_once() == 0  # the crashed holder's leases still live
        clock.advance(2)
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        late = await app.in_thread(app.store.mark_delivered, claimed, "crashed", throttle=10)
        assert late is False
        return resumer

    resumer = asyncio.run(scenario())
    job = app.get_job(export_id(8))
    assert job.delivery is Delivery.DELIVERED
    assert asyncio.run(session_finals(agent, "s1")) == {job.call_id: 1}
    if stored_before_crash:
        assert resumer.stats["already_in_session"] == 1
        assert resumer.stats["delivered"] == 0
        assert runner.tally.response_messages() == []
    else:
        assert resumer.stats["already_in_session"] == 0
        assert resumer.stats["delivered"] == 1
        assert runner.tally.finals() == {job.call_id: 1}


# -- 6. expiry -----------------------------------------------------------------------------


def test_expired_job_is_delivered_once_and_a_late_result_is_ignored(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Past its deadline a job expires once, is delivered once; a late result is a no-op."""
    app = fake_app
    cancelled: list[str] = []
    register_export(app, deadline="45m", on_cancel=lambda job: cancelled.append(job.id))
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    runner = Recording(agent)
    sweeper = app.sweeper()
    started = clock.now()

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 3")
        resumer = app.deliverer(runner)
        clock.advance(44 * 60)
        assert await sweeper.run_once() == []
        assert await resumer.run_once() == 0

        clock.advance(2 * 60)
        expired = await sweeper.run_once()
        assert [j.job_id for j in expired] == [export_id(3)]
        assert expired[0].state is JobState.EXPIRED
        assert await sweeper.run_once() == []
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        assert await sweeper.run_once() == []

        clock.advance(60)
        late = await app.complete_async(export_id(3), {"rows": 3})
        assert not late.changed
        assert late.job.state is JobState.EXPIRED
        assert await resumer.run_once() == 0
        assert await Dispatcher(app.jobs).run_once() == 1
        assert await Dispatcher(app.jobs).run_once() == 0

    asyncio.run(scenario())
    job = app.get_job(export_id(3))
    assert job.state is JobState.EXPIRED
    assert job.delivery is Delivery.DELIVERED
    assert job.deadline_at == started + 45 * 60
    (message,) = runner.tally.response_messages()
    (response,) = message.function_responses
    assert response.id == job.call_id
    assert response.response["status"] == "expired"
    assert response.response["message"] == "No result within 45 minutes."
    assert runner.tally.finals() == {job.call_id: 1}
    events = app.job_events(export_id(3))
    assert [e.kind for e in events] == ["expired", "ignored"]
    assert events[-1].data["state"] == "succeeded"
    assert events[-1].data["result"] == {"rows": 3}
    assert events[-1].data["reason"] == "late: after the deadline"
    assert events[-1].data["late"] is True
    assert cancelled == [export_id(3)]


def test_concurrent_sweepers_expire_each_overdue_job_once(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Two sweepers at once expire every overdue job exactly once and leave the rest alone."""
    app = fake_app

    @app.long_running(key="short:{n}", deadline="10m")
    def short(n: int) -> None:
        """Short."""

    @app.long_running(key="long:{n}", deadline="2h")
    def long(n: int) -> None:
        """Long."""

    for n in range(60):
        short.invoke({"n": n})
    for n in range(15):
        long.invoke({"n": n})
    clock.advance(11 * 60)
    sweepers = [app.sweeper(batch=7), app.sweeper(batch=7)]
    barrier = threading.Barrier(2)

    def sweep(sweeper: Sweeper) -> list[str]:
        barrier.wait(timeout=30)
        return [j.job_id for j in sweeper.sweep()]

    with ThreadPoolExecutor(max_workers=2) as pool:
        expired = [job_id for ids in pool.map(sweep, sweepers) for job_id in ids]
    assert len(expired) == 60
    assert set(expired) == {f"short:{n}" for n in range(60)}
    assert app.sweeper().sweep() == []
    counts = app.store.counts()
    assert counts == {("expired", "none"): 60, ("started", "none"): 15}
    assert all(
        [e.kind for e in app.job_events(f"short:{n}")].count("expired") == 1 for n in range(60)
    )


def test_late_completions_racing_the_sweeper_expire_each_job_once(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Late completions and a sweep at the same moment: each job expires exactly once,
    by whichever transaction comes first, and every completion is recorded as late."""
    app = fake_app

    @app.long_running(key="job:{n}", deadline="1m")
    def work(n: int) -> None:
        """Works."""

    n_jobs = 120
    for n in range(n_jobs):
        work.invoke({"n": n})
    clock.advance(61)
    barrier = threading.Barrier(2)

    def complete_all() -> list[longcall.FinishOutcome]:
        barrier.wait(timeout=30)
        return [app.complete(f"job:{n}", {"n": n}) for n in range(n_jobs)]

    def sweep() -> set[str]:
        barrier.wait(timeout=30)
        return {job.job_id for job in app.sweeper(batch=10).sweep()}

    with ThreadPoolExecutor(max_workers=2) as pool:
        completed_future = pool.submit(complete_all)
        expired_future = pool.submit(sweep)
        outcomes, expired = completed_future.result(), expired_future.result()

    assert all(o.late and not o.changed for o in outcomes)
    assert expired <= {f"job:{n}" for n in range(n_jobs)}
    for n in range(n_jobs):
        job_id = f"job:{n}"
        assert app.get_job(job_id).state is JobState.EXPIRED
        # One expiry per job, whoever made it, then the completion recorded as late.
        events = app.job_events(job_id)
        assert [e.kind for e in events] == ["expired", "ignored"]
        assert events[-1].data["late"] is True
        assert events[0].data == app.get_job(job_id).result
    assert app.sweeper().sweep() == []


# -- 7. parallel calls ---------------------------------------------------------------------


def test_parallel_calls_completed_together_arrive_in_one_message(app: longcall.App) -> None:
    """Two calls of one turn that finish together reach the agent as one two-part message."""
    register_export(app)
    rule = longcall.Rule(r"both", calls=[("export", {"n": 1}), ("export", {"n": 2})])
    agent = longcall.ScriptedAgent(app, rules=[rule])
    runner = Recording(agent)

    async def scenario() -> None:
        events = await app.run_turn_async(runner, user_id="u1", session_id="s1", text="both")
        calls = {c.id: c.args["n"] for e in events for c in e.function_calls}
        assert len(calls) == 2
        await app.complete_async(export_id(1), {"part": 1})
        await app.complete_async(export_id(2), {"part": 2})
        resumer = app.deliverer(runner)
        assert await resumer.run_once() == 2
        assert await resumer.run_once() == 0
        (message,) = runner.tally.response_messages()
        assert len(message.function_responses) == 2
        got = {r.id: (r.name, r.response["result"]) for r in message.function_responses}
        assert got == {cid: ("export", {"part": n}) for cid, n in calls.items()}
        history = await agent.history("s1")
        resume_invocations = {
            e.invocation_id for e in history if e.author == "user" and e.function_responses
        }
        assert resume_invocations == {history[0].invocation_id}
        assert await session_finals(agent, "s1") == {cid: 1 for cid in calls}
        replies_after_resume = [e for e in history[4:] if e.author == agent.name and e.text]
        assert len(replies_after_resume) == 1  # the model answered both at once

    asyncio.run(scenario())


def test_parallel_calls_completed_apart_arrive_in_two_messages(app: longcall.App) -> None:
    """The same two calls completed far apart reach the agent as two one-part messages."""
    register_export(app)
    rule = longcall.Rule(r"both", calls=[("export", {"n": 1}), ("export", {"n": 2})])
    agent = longcall.ScriptedAgent(app, rules=[rule])
    runner = Recording(agent)

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="both")
        resumer = app.deliverer(runner)
        await app.complete_async(export_id(2), {"part": 2})
        assert await resumer.run_once() == 1
        await app.complete_async(export_id(1), {"part": 1})
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        messages = runner.tally.response_messages()
        assert [len(m.function_responses) for m in messages] == [1, 1]
        assert [m.function_responses[0].response["jobId"] for m in messages] == [
            export_id(2),
            export_id(1),
        ]
        assert sorted((await session_finals(agent, "s1")).values()) == [1, 1]

    asyncio.run(scenario())


def test_jobs_of_different_invocations_are_never_mixed_in_one_message(app: longcall.App) -> None:
    """Ready together, jobs of two turns of one session still go as one message per turn."""
    register_export(app)
    rules = [
        longcall.Rule(r"both", calls=[("export", {"n": 1}), ("export", {"n": 2})]),
        EXPORT_RULE,
    ]
    agent = longcall.ScriptedAgent(app, rules=rules)
    runner = Recording(agent)

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="both")
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 3")
        for n in (3, 1, 2):
            await app.complete_async(export_id(n), {"n": n})
        assert await app.deliverer(runner).run_once() == 3
        messages = runner.tally.response_messages()
        parts = sorted(sorted(r.response["jobId"] for r in m.function_responses) for m in messages)
        assert parts == [[export_id(1), export_id(2)], [export_id(3)]]
        jobs = {j.job_id: j for j in await app.list_jobs_async()}
        for m in messages:
            assert len({jobs[r.response["jobId"]].invocation_id for r in m.function_responses}) == 1

    asyncio.run(scenario())


# -- 8. progress ---------------------------------------------------------------------------


def test_progress_reaches_the_model_only_when_asked_and_throttled(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Silent progress stays silent; announced progress is throttled to the latest; final last."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    runner = Recording(agent)
    job_id = export_id(5)

    async def scenario() -> str:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 5")
        call_id = (await app.get_job_async(job_id)).call_id
        assert call_id is not None
        resumer = app.deliverer(runner)

        job = await app.progress_async(job_id, {"step": "queued"})
        assert job is not None and job.delivery is Delivery.NONE
        assert await resumer.run_once() == 0
        assert runner.tally.response_messages() == []

        clock.advance(1)
        await app.progress_async(job_id, {"pct": 10}, notify_model=True)
        assert await resumer.run_once() == 1
        assert resumer.stats["progress_delivered"] == 1

        for pct in (20, 30, 40):
            clock.advance(1)
            job = await app.progress_async(job_id, {"pct": pct}, notify_model=True)
            assert job is not None and job.delivery is Delivery.READY
            assert await resumer.run_once() == 0  # throttled: 10s after the last one heard
        clock.advance(7)
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0

        clock.advance(1)
        await app.progress_async(job_id, {"pct": 90}, notify_model=True)
        assert await resumer.run_once() == 0  # throttled
        assert (await app.complete_async(job_id, {"rows": 5})).changed
        assert await resumer.run_once() == 1  # the final result does not wait
        assert await resumer.run_once() == 0
        clock.advance(60)
        assert await resumer.run_once() == 0
        assert await app.progress_async(job_id, {"pct": 100}, notify_model=True) is None
        return call_id

    call_id = asyncio.run(scenario())
    messages = runner.tally.response_messages()
    assert [len(m.function_responses) for m in messages] == [1, 1, 1]
    responses = [m.function_responses[0] for m in messages]
    assert {(r.id, r.name) for r in responses} == {(call_id, "export")}
    assert [r.response for r in responses] == [
        {"status": "running", "jobId": job_id, "progress": {"pct": 10}},
        {"status": "running", "jobId": job_id, "progress": {"pct": 40}},
        {"status": "succeeded", "jobId": job_id, "result": {"rows": 5}},
    ]
    history = asyncio.run(agent.history("s1"))
    in_session = [
        r.response["status"]
        for e in history
        if e.author == "user"
        for r in e.function_responses
        if r.id == call_id
    ]
    assert in_session == ["running", "running", "succeeded"]
    job = app.get_job(job_id)
    assert job.delivery is Delivery.DELIVERED
    assert job.progress == {"pct": 90}
    events = app.job_events(job_id)
    progress_events = [e.data for e in events if e.kind == "progress"]
    assert [(p["data"], p["notifyModel"]) for p in progress_events] == [
        ({"step": "queued"}, False),
        ({"pct": 10}, True),
        ({"pct": 20}, True),
        ({"pct": 30}, True),
        ({"pct": 40}, True),
        ({"pct": 90}, True),
    ]
    assert [e.kind for e in events][-1] == "succeeded"


def test_final_result_during_a_progress_delivery_follows_it(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """A result that arrives while progress is being delivered is delivered right after it."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    completed: list[bool] = []

    async def complete_meanwhile(message: Message) -> None:
        if message.function_responses and not completed:
            completed.append((await app.complete_async(export_id(4), {"rows": 4})).changed)

    runner = Recording(agent, before=complete_meanwhile)

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 4")
        await app.progress_async(export_id(4), {"pct": 50}, notify_model=True)
        resumer = app.deliverer(runner)
        assert await resumer.run_once() == 1
        assert completed == [True]
        assert (await app.get_job_async(export_id(4))).delivery is Delivery.READY
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0

    asyncio.run(scenario())
    statuses = [
        [r.response["status"] for r in m.function_responses]
        for m in runner.tally.response_messages()
    ]
    assert statuses == [["running"], ["succeeded"]]
    assert app.get_job(export_id(4)).delivery is Delivery.DELIVERED
    assert asyncio.run(session_finals(agent, "s1")) == {app.get_job(export_id(4)).call_id: 1}


def test_progress_throttle_is_per_job(fake_app: longcall.App, clock: longcall.FakeClock) -> None:
    """One job's recent announcement does not hold back another job's first one."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    runner = Recording(agent)

    async def scenario() -> None:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 1")
        await app.run_turn_async(runner, user_id="u2", session_id="s2", text="export 2")
        resumer = app.deliverer(runner)
        await app.progress_async(export_id(1), {"pct": 10}, notify_model=True)
        assert await resumer.run_once() == 1
        clock.advance(1)
        await app.progress_async(export_id(1), {"pct": 20}, notify_model=True)
        await app.progress_async(export_id(2, "u2"), {"pct": 10}, notify_model=True)
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0
        clock.advance(9)
        assert await resumer.run_once() == 1

    asyncio.run(scenario())
    got = [
        (r.response["jobId"], r.response["progress"]["pct"])
        for m in runner.tally.response_messages()
        for r in m.function_responses
    ]
    assert got == [(export_id(1), 10), (export_id(2, "u2"), 10), (export_id(1), 20)]


# -- 9. delivery failure -------------------------------------------------------------------


def test_failing_runner_is_retried_with_backoff_then_left_failed(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """A runner that raises is retried with growing delays, then the job is left FAILED."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    healthy = Recording(agent)
    broken = Recording(agent, healthy.tally, fail_with=lambda: RuntimeError("agent down"))
    job_id = export_id(9)

    async def scenario() -> longcall.Deliverer:
        await app.run_turn_async(healthy, user_id="u1", session_id="s1", text="export 9")
        await app.complete_async(job_id, {"rows": 9})
        resumer = app.deliverer(broken, max_attempts=3, retry_base=10, retry_cap=1000)

        delays = []
        for attempt in (1, 2):
            assert await resumer.run_once() == 1
            job = await app.get_job_async(job_id)
            assert job.attempts == attempt
            assert job.delivery is Delivery.READY
            assert job.claim_holder is None
            assert job.last_error == "RuntimeError: agent down"
            assert job.available_at is not None
            delays.append(job.available_at - clock.now())
            assert await resumer.run_once() == 0  # not before the backoff has passed
            clock.advance(delays[-1])
        assert 5 <= delays[0] <= 10
        assert 10 <= delays[1] <= 20

        assert await resumer.run_once() == 1
        job = await app.get_job_async(job_id)
        assert job.attempts == 3
        assert job.delivery is Delivery.FAILED
        assert job.last_error == "RuntimeError: agent down"
        clock.advance(24 * 3600)
        assert await resumer.run_once() == 0
        return resumer

    resumer = asyncio.run(scenario())
    assert resumer.stats["delivery_retried"] == 2
    assert resumer.stats["delivery_failed"] == 1
    assert resumer.stats["delivered"] == 0
    assert len(healthy.tally.response_messages()) == 3
    assert [j.job_id for j in app.list_jobs(delivery=Delivery.FAILED)] == [job_id]
    job = app.get_job(job_id)
    assert job.state is JobState.SUCCEEDED
    events = [(e.kind, e.data.get("attempt")) for e in app.job_events(job_id)]
    assert events == [
        ("succeeded", None),
        ("delivery_error", 1),
        ("delivery_error", 2),
        ("delivery_failed", 3),
    ]
    assert asyncio.run(session_finals(agent, "s1")) == Counter()


def test_final_result_is_delivered_after_a_given_up_progress_announcement(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Giving up on a progress announcement does not give up on the job's final result."""
    app = fake_app
    register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    healthy = Recording(agent)
    broken = Recording(agent, healthy.tally, fail_with=lambda: RuntimeError("agent down"))

    async def scenario() -> None:
        await app.run_turn_async(healthy, user_id="u1", session_id="s1", text="export 6")
        await app.progress_async(export_id(6), {"pct": 50}, notify_model=True)
        failing = app.deliverer(broken, max_attempts=2, retry_base=1)
        assert await failing.run_once() == 1
        clock.advance(1)
        assert await failing.run_once() == 1
        job = await app.get_job_async(export_id(6))
        assert (job.delivery, job.attempts) == (Delivery.FAILED, 2)

        assert (await app.complete_async(export_id(6), {"rows": 6})).changed
        job = await app.get_job_async(export_id(6))
        assert (job.delivery, job.attempts) == (Delivery.READY, 0)
        resumer = app.deliverer(healthy)
        assert await resumer.run_once() == 1
        assert await resumer.run_once() == 0

    asyncio.run(scenario())
    job = app.get_job(export_id(6))
    assert job.delivery is Delivery.DELIVERED
    statuses = [
        [r.response["status"] for r in m.function_responses]
        for m in healthy.tally.response_messages()
    ]
    assert statuses == [["running"], ["running"], ["succeeded"]]
    assert asyncio.run(session_finals(agent, "s1")) == {job.call_id: 1}


def test_unknown_call_marks_the_job_orphaned_at_once(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """A runner raising UnknownCallError orphans the job on the first attempt, never retried."""
    app = fake_app
    export = register_export(app)
    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    runner = Recording(agent)

    async def scenario() -> longcall.Deliverer:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="export 1")
        ghost = longcall.CallIds(agent.app_name, "u1", "s1", "call-ghost", "inv-ghost")
        pending = await export.invoke_async({"n": 2}, ghost)
        assert pending["status"] == "pending"
        await app.complete_async(export_id(2), {"rows": 2})
        resumer = app.deliverer(runner, max_attempts=5)
        assert await resumer.run_once() == 1
        clock.advance(24 * 3600)
        assert await resumer.run_once() == 0
        return resumer

    resumer = asyncio.run(scenario())
    job = app.get_job(export_id(2))
    assert job.delivery is Delivery.ORPHANED
    assert job.attempts == 1
    assert job.last_error is not None and "call-ghost" in job.last_error
    assert resumer.stats["orphaned"] == 1
    assert resumer.stats["delivery_retried"] == 0
    assert [e.kind for e in app.job_events(export_id(2))] == ["succeeded", "delivery_orphaned"]
    assert [j.job_id for j in app.list_jobs(delivery=Delivery.ORPHANED)] == [export_id(2)]
    assert len(runner.tally.response_messages()) == 1
    assert asyncio.run(session_finals(agent, "s1")) == Counter()


def test_unknown_call_orphans_only_its_own_job_in_a_shared_message(app: longcall.App) -> None:
    """One unknown call in a two-part message orphans that job alone; the others arrive."""
    export = register_export(app)
    rule = longcall.Rule(r"both", calls=[("export", {"n": 1}), ("export", {"n": 2})])
    agent = longcall.ScriptedAgent(app, rules=[rule])
    runner = Recording(agent)

    async def scenario() -> longcall.Deliverer:
        await app.run_turn_async(runner, user_id="u1", session_id="s1", text="both")
        invocation = (await app.get_job_async(export_id(1))).invocation_id
        ghost = longcall.CallIds(agent.app_name, "u1", "s1", "call-ghost", invocation)
        assert (await export.invoke_async({"n": 3}, ghost))["status"] == "pending"
        for n in (1, 2, 3):
            await app.complete_async(export_id(n), {"n": n})
        resumer = app.deliverer(runner)
        assert await resumer.run_once() == 3
        assert await resumer.run_once() == 0
        return resumer

    resumer = asyncio.run(scenario())
    deliveries = {n: app.get_job(export_id(n)).delivery for n in (1, 2, 3)}
    assert deliveries == {1: Delivery.DELIVERED, 2: Delivery.DELIVERED, 3: Delivery.ORPHANED}
    assert resumer.stats["orphaned"] == 1
    assert resumer.stats["delivered"] == 2
    calls = {app.get_job(export_id(n)).call_id for n in (1, 2)}
    assert asyncio.run(session_finals(agent, "s1")) == dict.fromkeys(calls, 1)
