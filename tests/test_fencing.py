"""Fencing tokens: a holder that lost its claim writes nothing, wherever it would write.

Store level (both backends, on a fake clock): every take of a session's lease raises its
fence, a job remembers the fence it was claimed under, and a claim's outcome, renewal or
release matches nothing once the job was claimed again, even by the same holder. Deliverer
level (a real worker loop): the heartbeat that finds the fence moved cuts the delivery short,
and the built-in scripted agent checks the fence in the transaction that appends. The stalled
process scenarios with google-adk are in ``tests/adk/test_fencing.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest

import longcall
from longcall import CallIds, Delivery, FakeClock, FenceLost, JobState, Message, SessionKey
from longcall.agents import AgentEvent
from longcall.store import Store
from test_store_conformance import LEASE, THROTTLE, key, ready

# -- the store ----------------------------------------------------------------------------


def test_every_take_of_a_lease_raises_its_fence_and_a_release_keeps_it(
    store: Store, clock: FakeClock
) -> None:
    ready(store, "j1", session="s")
    [first] = store.claim("a", limit=10, lease=LEASE)
    assert first.claim_fence is not None
    assert store.holds_session(key("s"), "a", first.claim_fence)
    assert store.release(first, "a", error=None, delay=0, delivery=Delivery.READY)
    store.release_session(key("s"), "a")
    assert not store.holds_session(key("s"), "a", first.claim_fence)
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60)
    store.release_session(key("s"), "turn")
    [again] = store.claim("a", limit=10, lease=LEASE)
    # Released twice and taken by a user turn in between: the fence only ever rose.
    assert again.claim_fence == first.claim_fence + 2


def test_a_lease_that_ran_out_or_was_taken_is_no_longer_held(
    store: Store, clock: FakeClock
) -> None:
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    assert job.claim_fence is not None
    clock.advance(LEASE - 1)
    assert store.holds_session(key("s"), "a", job.claim_fence)
    clock.advance(1)
    assert not store.holds_session(key("s"), "a", job.claim_fence)  # ran out: nobody took it yet
    [taken] = store.claim("b", limit=10, lease=LEASE)
    assert taken.claim_fence == job.claim_fence + 1
    assert store.holds_session(key("s"), "b", taken.claim_fence)
    assert not store.holds_session(key("s"), "b", job.claim_fence)


def test_the_same_holder_claiming_again_fences_off_its_own_earlier_claim(
    store: Store, clock: FakeClock
) -> None:
    """The holder id alone cannot tell a stalled delivery from the one that replaced it (a
    worker whose own loop claimed the job again); the fence can."""
    ready(store, "j1", session="s")
    [stale] = store.claim("a", limit=10, lease=LEASE)
    clock.advance(LEASE)
    [fresh] = store.claim("a", limit=10, lease=LEASE)
    assert fresh.claim_holder == stale.claim_holder == "a"
    assert not store.renew("a", [stale], lease=LEASE)
    assert not store.mark_delivered(stale, "a", throttle=THROTTLE)
    assert not store.release(stale, "a", error="late", delay=0, delivery=Delivery.FAILED)
    assert store.get_job("j1") == fresh
    assert store.mark_delivered(fresh, "a", throttle=THROTTLE)
    assert store.get_job("j1").delivery is Delivery.DELIVERED


def test_no_outcome_is_recorded_once_a_user_turn_took_the_session(
    store: Store, clock: FakeClock
) -> None:
    """The job's claim is intact (nobody claimed it again) but its session's lease ran out
    and a user turn took it: the stalled holder can neither mark nor give the job back."""
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    clock.advance(LEASE)
    assert store.take_session(key("s"), "turn", kind="turn", ttl=5)
    assert not store.mark_delivered(job, "a", throttle=THROTTLE)
    assert not store.release(job, "a", error=None, delay=0, delivery=Delivery.READY)
    assert store.get_job("j1").claim_holder == "a"  # it runs out, then goes to another
    store.release_session(key("s"), "turn")
    [taken] = store.claim("b", limit=10, lease=LEASE)
    assert taken.job_id == "j1" and taken.claim_holder == "b"


def test_a_lost_session_keeps_its_jobs_claims_unrenewed(store: Store, clock: FakeClock) -> None:
    """Renewing under a lost fence extends nothing, not even the job claims it still has:
    they run out and go back to the queue."""
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    clock.advance(LEASE)
    assert store.take_session(key("s"), "turn", kind="turn", ttl=5)
    assert not store.renew("a", [job], lease=LEASE)
    assert store.get_job("j1").available_at == job.available_at
    clock.advance(5)
    assert [j.job_id for j in store.claim("b", limit=10, lease=LEASE)] == ["j1"]


def test_an_append_under_a_lost_fence_writes_nothing(store: Store, clock: FakeClock) -> None:
    store.ensure_session("s", app_name="app", user_id="u")
    ready(store, "j1", session="s")
    [job] = store.claim("a", limit=10, lease=LEASE)
    assert job.claim_fence is not None
    event = ("inv-1", "assistant", {"text": "done"}, None)
    assert store.append_session_events("s", [event], fence=(key("s"), "a", job.claim_fence)) == [1]
    clock.advance(LEASE)
    assert store.take_session(key("s"), "turn", kind="turn", ttl=60)
    with pytest.raises(FenceLost, match="no longer held by 'a' under fence"):
        store.append_session_events("s", [event], fence=(key("s"), "a", job.claim_fence))
    assert [e.seq for e in store.session_events("s")] == [1]


# -- the deliverer ------------------------------------------------------------------------


class Held:
    """An agent runner whose deliveries wait until ``release`` is set (a model that thinks
    longer than the lease); it records each run's start and how it ended."""

    app_name = "fence"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.runs: list[str] = []  # "cancelled" or "finished", per run
        self.finished: set[str] = set()

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.runs.append("cancelled")
            raise
        self.runs.append("finished")
        self.finished.update(r.id for r in message.function_responses)
        if False:  # pragma: no cover - an async generator that says nothing
            yield AgentEvent(author="", invocation_id="")

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        return call_id in self.finished


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


async def ready_job(app: longcall.App, session_id: str) -> str:
    @app.long_running(name="export")
    def export(n: int) -> str:
        """Exports data set n."""
        return "started"

    job_id = str((await asyncio.to_thread(export.invoke, {"n": 1}))["jobId"])
    await app.attach_async(job_id, CallIds("fence", "u", session_id, "c-1", "inv-1"))
    assert (await app.complete_async(job_id, {"n": 1})).changed
    return job_id


def test_a_heartbeat_that_finds_the_fence_moved_cuts_the_delivery_short(
    app: longcall.App,
) -> None:
    """The session's lease is taken again while a delivery runs (here by the worker's own
    holder id, which a stale delivery shares with its replacement): the next heartbeat
    finds its fence gone and cancels the run; the job goes back and is delivered once."""
    agent = Held()
    worker = app.worker(agent, lease="0.6s", poll_interval="0.05s")
    assert worker.deliverer is not None
    deliverer = worker.deliverer

    async def scenario() -> str:
        running = asyncio.create_task(worker.run(handle_signals=False))
        job_id = await ready_job(app, "s1")
        await asyncio.wait_for(agent.entered.wait(), 30)
        assert await app.in_thread(
            app.store.take_session,
            SessionKey("fence", "u", "s1"),
            deliverer.holder,
            kind="resume",
            ttl=0.6,
        )
        give_up = time.monotonic() + 30
        while "cancelled" not in agent.runs:
            assert time.monotonic() < give_up, "the heartbeat never cut the delivery short"
            await asyncio.sleep(0.01)
        agent.release.set()
        while (await app.get_job_async(job_id)).delivery is not Delivery.DELIVERED:
            assert time.monotonic() < give_up, "the job was never delivered"
            await asyncio.sleep(0.02)
        worker.stop()
        await asyncio.wait_for(running, 30)
        return job_id

    asyncio.run(scenario())
    assert agent.runs == ["cancelled", "finished"]
    assert deliverer.stats["fence_lost"] == 1
    assert deliverer.stats["delivered"] == 1


def test_the_scripted_agent_appends_nothing_once_its_fence_is_lost(db_url: str) -> None:
    """The built-in agent checks the fence in the transaction that appends: the session's
    lease moves on while its model thinks, so its reply is never written; once the job's
    claim runs out, the next delivery finds the closing response there and only marks it."""
    with longcall.App(db_url) as app:

        @app.long_running(name="export")
        def export(n: int) -> str:
            """Exports data set n."""
            return "started"

        stolen = False

        async def think() -> None:
            nonlocal stolen
            if deliverer.holder and not stolen and thinking_after_result():
                stolen = True
                # A newer take by the same holder, which dies with its lease: the delivery
                # fenced off releases only its own take, never this one.
                await app.in_thread(
                    app.store.take_session,
                    SessionKey("longcall-demo", "u", "s1"),
                    deliverer.holder,
                    kind="resume",
                    ttl=0.5,
                )

        agent = longcall.ScriptedAgent(
            app, rules=[longcall.Rule("export", calls=[("export", {"n": 1})])], think=think
        )
        deliverer = app.deliverer(agent, lease="0.5s", poll_interval=0.05)

        def thinking_after_result() -> bool:
            events = app.store.session_events("s1")
            return any(
                r["response"].get("status") == "succeeded"
                for e in events
                for r in e.content.get("functionResponses", ())
            )

        async def scenario() -> None:
            await app.run_turn_async(agent, user_id="u", session_id="s1", text="export please")
            [job] = await app.list_jobs_async()
            assert (await app.complete_async(job.job_id, {"url": "x"})).changed
            await deliverer.run_once()  # the reply is fenced off: nothing more is written
            # The job's claim (refused a give-back: its fence is gone) runs out; the next
            # pass finds the closing response there and only marks it.
            give_up = time.monotonic() + 30
            while (await app.get_job_async(job.job_id)).delivery is not Delivery.DELIVERED:
                assert time.monotonic() < give_up, "the job was never marked delivered"
                await deliverer.run_once()
                await asyncio.sleep(0.05)

        asyncio.run(scenario())
        events = app.store.session_events("s1")
        authors_after_result = [
            e.author
            for e in events
            if e.seq
            > next(
                e.seq
                for e in events
                if any(
                    r["response"].get("status") == "succeeded"
                    for r in e.content.get("functionResponses", ())
                )
            )
        ]
        assert authors_after_result == []
        assert deliverer.stats["fence_lost"] == 1
        assert deliverer.stats["already_in_session"] == 1
        assert app.get_job(app.list_jobs()[0].job_id).state is JobState.SUCCEEDED
