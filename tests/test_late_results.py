"""A result that comes at or after its job's deadline is late: recorded, never applied.

The conditional terminal update compares the deadline with the clock at the update (the
database's on PostgreSQL unless a test clock is set), so whether the sweeper has run or not,
the job ends expired, the agent hears the expiry once, and the late result stays in the
job's log. Each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

import longcall
from longcall import Delivery, JobState
from longcall.cli.main import main
from longcall.core.clock import SystemClock
from longcall.jobs.dispatcher import Dispatcher

EXPORT_RULE = longcall.Rule(r"export (\d+)", calls=[("export", lambda m: {"n": int(m[1])})])
FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})
DEADLINE = 45 * 60
REAL_DEADLINE = 0.3  # seconds, on the real clocks


class SkewedClock(SystemClock):
    """A host whose clock runs an hour ahead and that knows it is not the authority."""

    def now(self) -> float:
        return time.time() + 3600


def job_id(n: int) -> str:
    return longcall.job_id_for(f"export:{n}", "u1")


def start(
    app: longcall.App, n: int, deadline: float | str
) -> tuple[longcall.ScriptedAgent, list[str]]:
    """A user turn that starts export ``n``; the agent, and the ids its on_cancel hook saw."""
    cancelled: list[str] = []

    @app.long_running(
        key="export:{n}", deadline=deadline, on_cancel=lambda j: cancelled.append(j.id)
    )
    def export(n: int) -> str:
        """Exports data set n."""
        return f"Export {n} started."

    agent = longcall.ScriptedAgent(app, rules=[EXPORT_RULE])
    app.run_turn(agent, user_id="u1", session_id="s1", text=f"export {n}")
    return agent, cancelled


def deliver_all(app: longcall.App, agent: longcall.ScriptedAgent) -> tuple[int, Counter[str]]:
    """Run the resumer until it has nothing left; how many it delivered, and the closing
    responses per status in the session's history."""

    async def run() -> tuple[int, Counter[str]]:
        resumer = app.deliverer(agent)
        delivered = 0
        while n := await resumer.run_once():
            delivered += n
        history = await agent.history("s1")
        statuses = Counter(
            r.response.get("status")
            for event in history
            if event.author == "user"
            for r in event.function_responses
            if r.response.get("status") in FINAL_STATUSES
        )
        return delivered, statuses

    return asyncio.run(run())


def assert_ended_late(app: longcall.App, n: int, agent: longcall.ScriptedAgent) -> None:
    """Expired with the deadline's result, the late result logged as late, heard once."""
    job = app.get_job(job_id(n))
    assert job.state is JobState.EXPIRED
    assert job.result is not None and job.result["deadlineAt"] == job.deadline_at
    events = app.job_events(job_id(n))
    assert [e.kind for e in events] == ["expired", "ignored"]
    late = events[-1].data
    assert late["state"] == "succeeded" and late["result"] == {"rows": n}
    assert late["late"] is True and late["reason"] == "late: after the deadline"
    assert app.sweeper().sweep() == []  # nothing left for a sweeper, whenever it runs
    delivered, statuses = deliver_all(app, agent)
    assert delivered == 1 and statuses == {"expired": 1}
    assert deliver_all(app, agent) == (0, Counter({"expired": 1}))
    assert app.get_job(job_id(n)).delivery is Delivery.DELIVERED


@pytest.fixture
def clock() -> longcall.FakeClock:
    return longcall.FakeClock()


@pytest.fixture
def fake_app(db_url: str, clock: longcall.FakeClock) -> Iterator[longcall.App]:
    with longcall.App(db_url, clock=clock) as app:
        yield app


@pytest.fixture
def real_app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


# -- on the fake clock ---------------------------------------------------------------------


@pytest.mark.parametrize("swept_first", [False, True], ids=["before-sweep", "after-sweep"])
def test_result_after_the_deadline_is_late_whether_or_not_the_sweeper_ran(
    fake_app: longcall.App, clock: longcall.FakeClock, swept_first: bool
) -> None:
    """Past the deadline a completion changes nothing; the job expires and is heard once."""
    agent, cancelled = start(fake_app, 3, "45m")
    clock.advance(DEADLINE + 60)
    if swept_first:
        assert [j.job_id for j in fake_app.sweeper().sweep()] == [job_id(3)]
    outcome = fake_app.complete(job_id(3), {"rows": 3})
    assert (outcome.changed, outcome.late) == (False, True)
    assert outcome.job.state is JobState.EXPIRED
    assert_ended_late(fake_app, 3, agent)
    # The on_cancel hook's outbox item was queued once, as a sweeper's expiry queues it.
    assert asyncio.run(Dispatcher(fake_app.jobs).run_once()) == 1
    assert asyncio.run(Dispatcher(fake_app.jobs).run_once()) == 0
    assert cancelled == [job_id(3)]


def test_result_exactly_at_the_deadline_is_late(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """The deadline instant belongs to the deadline: now >= deadline_at is late."""
    agent, _ = start(fake_app, 4, "45m")
    clock.advance(DEADLINE)
    outcome = fake_app.complete(job_id(4), {"rows": 4})
    assert (outcome.changed, outcome.late) == (False, True)
    assert_ended_late(fake_app, 4, agent)


def test_result_just_before_the_deadline_is_applied(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """A millisecond before the deadline the result wins; the sweeper then has nothing."""
    agent, cancelled = start(fake_app, 5, "45m")
    clock.advance(DEADLINE - 0.001)
    outcome = fake_app.complete(job_id(5), {"rows": 5})
    assert (outcome.changed, outcome.late) == (True, False)
    clock.advance(3600)
    assert fake_app.sweeper().sweep() == []
    late = fake_app.fail(job_id(5), "too late anyway")
    assert (late.changed, late.late) == (False, False)  # first result won before the deadline
    assert fake_app.get_job(job_id(5)).state is JobState.SUCCEEDED
    assert deliver_all(fake_app, agent) == (1, Counter({"succeeded": 1}))
    assert cancelled == []


def test_extending_before_the_deadline_keeps_the_result_in_time(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """A deadline moved on before it passed makes a result after the old one in time."""
    agent, _ = start(fake_app, 6, "45m")
    clock.advance(DEADLINE - 60)
    assert fake_app.store.extend(job_id(6), 600) is not None
    clock.advance(120)  # past the first deadline, within the new one
    assert fake_app.sweeper().sweep() == []
    outcome = fake_app.complete(job_id(6), {"rows": 6})
    assert (outcome.changed, outcome.late) == (True, False)
    assert deliver_all(fake_app, agent) == (1, Counter({"succeeded": 1}))


def test_sweeper_does_not_expire_a_job_extended_after_it_looked(
    fake_app: longcall.App, clock: longcall.FakeClock
) -> None:
    """Found overdue, then extended: the sweeper's conditional expiry changes nothing."""
    start(fake_app, 7, "45m")
    clock.advance(DEADLINE)
    (overdue,) = fake_app.store.overdue(10)
    assert fake_app.store.extend(job_id(7), 600) is not None
    assert fake_app.store.expire(overdue) is None
    assert fake_app.get_job(job_id(7)).state is JobState.STARTED


@pytest.mark.parametrize("kind", ["fail", "cancel"])
def test_failure_and_cancel_after_the_deadline_are_late_too(
    fake_app: longcall.App, clock: longcall.FakeClock, kind: str
) -> None:
    """Any terminal result but the deadline's own comes too late past the deadline."""
    start(fake_app, 8, "45m")
    clock.advance(DEADLINE + 1)
    outcome = fake_app.fail(job_id(8), "boom") if kind == "fail" else fake_app.cancel(job_id(8))
    assert (outcome.changed, outcome.late, outcome.job.state) == (False, True, JobState.EXPIRED)
    assert fake_app.job_events(job_id(8))[-1].data["late"] is True


# -- on the real clocks: the database's on PostgreSQL, the host's on SQLite ----------------


@pytest.mark.parametrize("swept_first", [False, True], ids=["before-sweep", "after-sweep"])
def test_late_result_on_the_real_clock(real_app: longcall.App, swept_first: bool) -> None:
    """With the system clock and a 0.3 s deadline: the same outcome as on the fake clock."""
    agent, _ = start(real_app, 3, REAL_DEADLINE)
    time.sleep(REAL_DEADLINE + 0.2)
    if swept_first:
        assert [j.job_id for j in real_app.sweeper().sweep()] == [job_id(3)]
    outcome = real_app.complete(job_id(3), {"rows": 3})
    assert (outcome.changed, outcome.late) == (False, True)
    assert_ended_late(real_app, 3, agent)


def test_result_in_time_on_the_real_clock(real_app: longcall.App) -> None:
    """With the system clock, a result well within its deadline is applied."""
    agent, _ = start(real_app, 5, 30)
    outcome = real_app.complete(job_id(5), {"rows": 5})
    assert (outcome.changed, outcome.late) == (True, False)
    assert deliver_all(real_app, agent) == (1, Counter({"succeeded": 1}))


@pytest.mark.postgres
def test_postgres_compares_on_its_own_clock_not_a_skewed_host(pg_url: str) -> None:
    """A host an hour ahead completes a job with a 30 s deadline in time: the database's
    clock decides, so hosts with skewed clocks agree."""
    with longcall.App(pg_url) as app, longcall.App(pg_url, clock=SkewedClock()) as skewed:
        agent, _ = start(app, 9, 30)
        outcome = skewed.complete(job_id(9), {"rows": 9})
        assert (outcome.changed, outcome.late) == (True, False)
        assert skewed.sweeper().sweep() == []
        assert deliver_all(app, agent) == (1, Counter({"succeeded": 1}))


def test_late_cli_complete_answers_like_a_finished_job(db_url: str) -> None:
    """`longcall jobs complete` past the deadline: exit 0, unchanged and said to be late;
    with --strict the exit code of a finished job."""
    with longcall.App(db_url) as app:
        start(app, 3, REAL_DEADLINE)
    time.sleep(REAL_DEADLINE + 0.2)
    complete = ["jobs", "complete", job_id(3), "--database", db_url, "--result", '{"rows": 3}']
    runner = CliRunner()
    got = runner.invoke(main, [*complete, "-o", "table"])
    assert got.exit_code == 0, got.output
    assert got.output.strip() == (
        f"{job_id(3)}: expired (unchanged: its deadline had passed; the result is recorded as late)"
    )
    assert runner.invoke(main, [*complete, "--strict"]).exit_code == 5
    as_json = json.loads(runner.invoke(main, [*complete, "-o", "json"]).output)
    assert as_json["changed"] is False and as_json["job"]["state"] == "expired"
    with longcall.App(db_url) as app:
        kinds = [e.kind for e in app.job_events(job_id(3))]
        assert kinds == ["expired", "ignored", "ignored", "ignored"]
