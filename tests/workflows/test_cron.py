"""Cron schedules on both databases: the store's operations, the concurrency and misfire
policies, pause and resume, triggers, daylight saving through the scheduler's tick."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pydantic
import pytest

from longcall import App, RunStatus
from longcall.core.clock import FakeClock
from longcall.cron.scheduler import (
    ConcurrencyPolicy,
    Cron,
    CronConflict,
    CronFire,
    CronNotFound,
    Crons,
    CronValidationError,
    FireOutcome,
    MisfirePolicy,
    Scheduler,
)
from longcall.errors import WorkflowNotFound
from procs import sql_rows

T0 = datetime(2026, 1, 5, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC
TESTER = "tester"


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


class Report(pydantic.BaseModel):
    region: str
    days: int = 1


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    """An App with the workflows the schedules name: slow, fast and other (any input), and
    report (a Report)."""
    with App(db_url, clock=clock) as app:
        for name in ("slow", "fast", "other"):
            app.workflow(name)(lambda data=None: data)

        @app.workflow("report")
        def report(spec: Report) -> str:
            return spec.region

        yield app


@pytest.fixture
def crons(app: App) -> Crons:
    return Crons(app.runtime, app.workflows)


def minutely(crons: Crons, name: str = "every-minute", **options: object) -> Cron:
    """A schedule of workflow 'slow' firing at each minute (first at T0 + 60)."""
    cron = crons.create(name, "slow", "* * * * *", input={"n": 1}, **options)
    assert cron.next_fire_at == T0 + 60
    return cron


def runs_of(url: str, cron_id: str) -> list[tuple[str, str, str | None, float]]:
    """(run_id, status, concurrency_key, created_at) of a schedule's runs, oldest first."""
    return [
        (r[0], r[1], r[2], float(r[3]))
        for r in sql_rows(
            url,
            "SELECT run_id, status, concurrency_key, created_at FROM lc_runs "
            f"WHERE cron_id = '{cron_id}' ORDER BY created_at, run_id",
        )
    ]


def outcomes(fires: list[CronFire]) -> list[tuple[float, FireOutcome]]:
    return [(f.fire_at - T0, f.outcome) for f in fires]


def hold(app: App, run_id: str) -> None:
    """Take a queued run as a worker would: it is running."""
    assert app.store.hold_run(run_id, TESTER, lease=3600) is not None


def end(app: App, run_id: str, status: RunStatus) -> None:
    assert app.store.end_run(run_id, TESTER, status, state={}) is not None


# -- the schedule's record -----------------------------------------------------------------------


def test_create_get_list_and_delete(app: App, crons: Crons, db_url: str) -> None:
    """A schedule is created with its first occurrence after now, found by id and name,
    listed by name in pages with filters, and deleted once."""
    made = [
        crons.create(f"job-{i}", "slow" if i % 2 else "fast", "0 * * * *", user_id=f"u{i % 2}")
        for i in range(5)
    ]
    first = made[0]
    assert first.next_fire_at == T0 + 3600
    assert first.timezone == "UTC"
    assert first.concurrency_policy is ConcurrencyPolicy.SKIP
    assert first.misfire_policy is MisfirePolicy.SKIP
    assert (first.execution_count, first.last_fire_at, first.paused) == (0, None, False)
    assert first.created_at == T0
    assert crons.get(first.cron_id) == first
    assert crons.get_by_name("job-0") == first

    page = crons.list(limit=2)
    assert [c.name for c in page] == ["job-0", "job-1"]
    page = crons.list(limit=2, after=page[-1].name)
    assert [c.name for c in page] == ["job-2", "job-3"]
    assert [c.name for c in crons.list(workflow_id="slow")] == ["job-1", "job-3"]
    assert [c.name for c in crons.list(user_id="u0")] == ["job-0", "job-2", "job-4"]
    crons.pause(made[4].cron_id)
    assert [c.name for c in crons.list(paused=True)] == ["job-4"]
    assert len(crons.list(paused=False)) == 4

    assert crons.delete(first.cron_id) is True
    assert crons.delete(first.cron_id) is False
    with pytest.raises(CronNotFound):
        crons.get(first.cron_id)
    with pytest.raises(CronNotFound):
        crons.update(first.cron_id, paused=True)
    with pytest.raises(CronNotFound):
        crons.trigger(first.cron_id)


def test_a_taken_name_or_id_is_a_conflict(crons: Crons) -> None:
    """Creating a second schedule with a name or id in use, or renaming onto a used name,
    raises CronConflict and changes nothing."""
    a = crons.create("a", "slow", "* * * * *", cron_id="cron-a")
    b = crons.create("b", "slow", "* * * * *")
    with pytest.raises(CronConflict):
        crons.create("a", "other", "0 * * * *")
    with pytest.raises(CronConflict):
        crons.create("c", "other", "0 * * * *", cron_id="cron-a")
    with pytest.raises(CronConflict):
        crons.update(b.cron_id, name="a")
    assert crons.get(a.cron_id) == a
    assert crons.get(b.cron_id) == b
    assert len(crons.list()) == 2


def test_invalid_fields_are_value_errors_naming_the_field(crons: Crons) -> None:
    """A bad expression names cronExpression, an unknown zone names timezone, and so on for
    the policies; nothing is created."""
    cases: list[tuple[dict[str, object], str]] = [
        ({"expression": "*/0 * * *"}, "cronExpression"),
        ({"expression": "99 * * * *"}, "cronExpression"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"concurrency_policy": "sometimes"}, "concurrencyPolicy"),
        ({"misfire_policy": "later"}, "misfirePolicy"),
        ({"catch_up_max": -1}, "catchUpMax"),
        ({"name": " "}, "name"),
    ]
    for change, field in cases:
        kwargs: dict[str, object] = {"name": "x", "workflow_id": "slow", "expression": "0 * * * *"}
        kwargs |= change
        with pytest.raises(ValueError, match=f"^{field}: ") as caught:
            crons.create(**kwargs)
        assert isinstance(caught.value, CronValidationError)
        assert caught.value.field == field
    assert crons.list() == []


def test_create_checks_the_workflow_and_the_input_unless_told_not_to(crons: Crons) -> None:
    """An unknown workflow raises WorkflowNotFound and input the workflow refuses raises
    CronValidationError naming input; nothing is created. A right input is stored as the
    workflow encodes it; check_workflow=False takes a workflow registered elsewhere."""
    with pytest.raises(WorkflowNotFound):
        crons.create("x", "nope", "0 * * * *")
    for bad, where in (({"days": 2}, "input.region"), ({"region": "EU", "days": "many"}, "days")):
        with pytest.raises(CronValidationError) as caught:
            crons.create("x", "report", "0 * * * *", input=bad)
        assert caught.value.field == "input"
        assert where in str(caught.value) and "'report' does not take it" in str(caught.value)
    assert crons.list() == []

    made = crons.create("eu", "report", "0 * * * *", input=Report(region="EU"))
    assert made.input == {"region": "EU", "days": 1}
    elsewhere = crons.create("w", "nope", "0 * * * *", input={"n": 1}, check_workflow=False)
    assert (elsewhere.workflow_id, elsewhere.input) == ("nope", {"n": 1})
    assert [c.name for c in crons.list()] == ["eu", "w"]


def test_update_changes_fields_and_reschedules_on_a_new_expression_or_zone(
    crons: Crons, clock: FakeClock
) -> None:
    """Editing policies or input keeps next_fire_at; a new expression or zone restarts from
    the first occurrence after now; a bad one is refused and changes nothing."""
    cron = crons.create("daily", "slow", "0 9 * * *", input={"a": 1})
    assert cron.next_fire_at == T0 + 9 * 3600
    clock.advance(3600)
    edited = crons.update(
        cron.cron_id,
        input={"a": 2},
        concurrency_policy="queue",
        misfire_policy=MisfirePolicy.CATCH_UP,
        catch_up_max=4,
    )
    assert edited.input == {"a": 2}
    assert edited.concurrency_policy is ConcurrencyPolicy.QUEUE
    assert (edited.misfire_policy, edited.catch_up_max) == (MisfirePolicy.CATCH_UP, 4)
    assert edited.next_fire_at == T0 + 9 * 3600
    assert edited.updated_at == T0 + 3600

    moved = crons.update(cron.cron_id, timezone="Asia/Tokyo")  # 09:00 JST is 00:00 UTC
    assert moved.next_fire_at == T0 + 86400
    moved = crons.update(cron.cron_id, expression="*/10 * * * *")
    assert moved.next_fire_at == T0 + 3600 + 600

    with pytest.raises(CronValidationError) as caught:
        crons.update(cron.cron_id, expression="every day")
    assert caught.value.field == "cronExpression"
    with pytest.raises(CronValidationError) as caught:
        crons.update(cron.cron_id, timezone="Moon/Tranquility")
    assert caught.value.field == "timezone"
    assert crons.get(cron.cron_id) == moved
    assert crons.update(cron.cron_id, input=None).input is None


# -- firing ----------------------------------------------------------------------------------


def test_an_occurrence_starts_one_queued_run_once(app: App, crons: Crons, db_url: str) -> None:
    """At its time the schedule starts one queued run of its workflow with its input; a
    second tick, or a second scheduler, at the same time starts nothing more."""
    cron = minutely(crons, concurrency_policy="allow", user_id="u1")
    scheduler = Scheduler(app.runtime)
    assert scheduler.tick(T0 + 59) == []
    [fire] = scheduler.tick(T0 + 60)
    assert (fire.fire_at, fire.outcome) == (T0 + 60, FireOutcome.FIRED)
    assert scheduler.tick(T0 + 61) == []
    assert Scheduler(app.runtime).tick(T0 + 61) == []

    assert fire.run_id is not None
    run = app.store.get_run(fire.run_id)
    assert (run.workflow_id, run.status, run.input, run.user_id) == (
        "slow",
        RunStatus.QUEUED,
        {"n": 1},
        "u1",
    )
    assert run.cron_id == cron.cron_id
    assert run.concurrency_key is None
    after = crons.get(cron.cron_id)
    assert (after.next_fire_at, after.last_fire_at, after.execution_count) == (
        T0 + 120,
        T0 + 60,
        1,
    )
    assert crons.fires(cron.cron_id) == [fire]
    assert [r[0] for r in runs_of(db_url, cron.cron_id)] == [fire.run_id]


def test_concurrent_schedulers_start_each_occurrence_once(app: App, crons: Crons) -> None:
    """Four schedulers ticking at the same moments on threads claim every occurrence of
    twenty schedules exactly once."""
    made = [minutely(crons, f"s{i}", concurrency_policy="allow") for i in range(20)]
    schedulers = [Scheduler(app.runtime, batch=7) for _ in range(4)]
    claimed: list[CronFire] = []
    lock = threading.Lock()

    def work(scheduler: Scheduler) -> None:
        for minute in range(1, 4):
            got = scheduler.tick(T0 + 60 * minute)
            with lock:
                claimed.extend(got)

    threads = [threading.Thread(target=work, args=(s,)) for s in schedulers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    keys = sorted((f.cron_id, f.fire_at) for f in claimed)
    expected = sorted((c.cron_id, T0 + 60 * m) for c in made for m in range(1, 4))
    assert keys == expected
    assert len({f.run_id for f in claimed}) == len(claimed)
    assert sum(s.claimed for s in schedulers) == 60


def test_skip_starts_nothing_while_a_run_is_active_and_failed_or_cancelled_runs_free_it(
    app: App, crons: Crons, db_url: str
) -> None:
    """'skip': an occurrence while the schedule's run is queued, running or waiting for input
    is recorded as skipped; once that run fails, or is cancelled, the next one starts."""
    cron = minutely(crons)
    scheduler = Scheduler(app.runtime)
    got: list[CronFire] = []

    def tick(minute: int) -> CronFire:
        [fire] = scheduler.tick(T0 + 60 * minute)
        got.append(fire)
        return fire

    first = tick(1)
    assert first.run_id is not None
    assert crons.active_runs(cron.cron_id) == 1
    assert tick(2).run_id is None  # queued
    hold(app, first.run_id)
    assert tick(3).run_id is None  # running
    end(app, first.run_id, RunStatus.FAILED)
    assert crons.active_runs(cron.cron_id) == 0
    second = tick(4)
    assert second.run_id is not None
    hold(app, second.run_id)
    end(app, second.run_id, RunStatus.WAITING_INPUT)
    assert crons.active_runs(cron.cron_id) == 1
    assert tick(5).run_id is None  # waiting for input
    assert app.store.request_run_cancel(second.run_id) is not None
    assert crons.active_runs(cron.cron_id) == 0
    third = tick(6)
    assert third.run_id is not None

    assert outcomes(got) == [
        (60, FireOutcome.FIRED),
        (120, FireOutcome.SKIPPED),
        (180, FireOutcome.SKIPPED),
        (240, FireOutcome.FIRED),
        (300, FireOutcome.SKIPPED),
        (360, FireOutcome.FIRED),
    ]
    assert [(r[0], r[1]) for r in runs_of(db_url, cron.cron_id)] == [
        (first.run_id, "failed"),
        (second.run_id, "cancelled"),
        (third.run_id, "queued"),
    ]
    after = crons.get(cron.cron_id)
    assert (after.execution_count, after.last_fire_at) == (3, T0 + 360)
    assert crons.fires(cron.cron_id, limit=2) == got[::-1][:2]
    assert crons.fires(cron.cron_id, before=got[3].fire_at) == got[2::-1]


def test_allow_starts_a_run_at_every_occurrence(app: App, crons: Crons, db_url: str) -> None:
    """'allow': each occurrence starts a run beside the active ones; they end independently."""
    cron = minutely(crons, concurrency_policy="allow")
    scheduler = Scheduler(app.runtime)
    fires = [f for m in (1, 2, 3) for f in scheduler.tick(T0 + 60 * m)]
    assert [f.outcome for f in fires] == [FireOutcome.FIRED] * 3
    runs = runs_of(db_url, cron.cron_id)
    assert [r[0] for r in runs] == [f.run_id for f in fires]
    assert [r[2] for r in runs] == [None, None, None]
    assert crons.active_runs(cron.cron_id) == 3
    hold(app, runs[1][0])
    end(app, runs[1][0], RunStatus.COMPLETED)
    assert crons.active_runs(cron.cron_id) == 2
    assert crons.get(cron.cron_id).execution_count == 3


def test_queue_runs_share_a_key_and_start_one_at_a_time_in_order(
    app: App, crons: Crons, db_url: str, clock: FakeClock
) -> None:
    """'queue': every occurrence starts a run keyed cron:<id>; a worker takes them one at a
    time, oldest first, the next once the previous one ended (failed ones included)."""
    cron = minutely(crons, concurrency_policy="queue")
    scheduler = Scheduler(app.runtime)
    fires = [f for m in (1, 2, 3) for f in scheduler.tick(T0 + 60 * m)]
    runs = runs_of(db_url, cron.cron_id)
    assert [r[0] for r in runs] == [f.run_id for f in fires]
    assert {r[2] for r in runs} == {f"cron:{cron.cron_id}"}
    assert crons.active_runs(cron.cron_id) == 3

    clock.set(T0 + 180)
    taken: list[str] = []
    for status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.COMPLETED):
        claimed = app.store.claim_runs(TESTER, limit=10, lease=60)
        assert len(claimed) == 1
        assert app.store.claim_runs(TESTER, limit=10, lease=60) == []
        run_id = claimed[0][0].run_id
        taken.append(run_id)
        end(app, run_id, status)
    assert taken == [f.run_id for f in fires]
    assert crons.active_runs(cron.cron_id) == 0


# -- missed occurrences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "catch_up_max", "expected"),
    [
        ("skip", 0, []),
        ("run_once", 0, [1200]),
        ("catch_up", 3, [1080, 1140, 1200]),
        ("catch_up", 0, []),
        ("catch_up", 50, [60 * m for m in range(1, 21)]),
    ],
)
def test_misfire_policies_after_an_outage(
    app: App, crons: Crons, db_url: str, policy: str, catch_up_max: int, expected: list[int]
) -> None:
    """No scheduler ran for 20 minutes: skip drops the 20 missed occurrences, run_once
    starts one run for them (at the latest), catch_up starts the latest catch_up_max
    oldest first; the schedule then goes on from the next occurrence."""
    cron = minutely(
        crons,
        concurrency_policy="queue",
        misfire_policy=policy,
        catch_up_max=catch_up_max,
    )
    scheduler = Scheduler(app.runtime, misfire_grace=20)
    fires = scheduler.tick(T0 + 1230)  # occurrences 60 … 1200 are all over 20 s late
    assert [(f.fire_at - T0, f.outcome) for f in fires] == [
        (at, FireOutcome.FIRED) for at in expected
    ]
    runs = runs_of(db_url, cron.cron_id)
    assert [r[0] for r in runs] == [f.run_id for f in fires]
    created = [r[3] for r in runs]
    assert created == sorted(set(created))  # strictly increasing: the queue keeps their order
    after = crons.get(cron.cron_id)
    assert after.next_fire_at == T0 + 1260
    assert after.execution_count == len(expected)
    assert scheduler.tick(T0 + 1250) == []
    [next_fire] = scheduler.tick(T0 + 1261)
    assert next_fire.fire_at == T0 + 1260


@pytest.mark.parametrize("policy", ["skip", "run_once", "catch_up"])
def test_occurrences_within_the_grace_fire_whatever_the_policy(
    app: App, crons: Crons, policy: str
) -> None:
    """A tick that comes late, but within misfire_grace, fires every occurrence it passed."""
    cron = minutely(crons, concurrency_policy="allow", misfire_policy=policy, catch_up_max=1)
    fires = Scheduler(app.runtime, misfire_grace=300).tick(T0 + 245)
    assert [f.fire_at - T0 for f in fires] == [60, 120, 180, 240]
    assert crons.get(cron.cron_id).next_fire_at == T0 + 300


def test_catch_up_of_a_long_outage_is_bounded(app: App, crons: Crons) -> None:
    """A per-second schedule three days without a scheduler catches up its latest
    catch_up_max occurrences only, at once, not 259,200 of them."""
    cron = crons.create(
        "seconds",
        "slow",
        "* * * * * *",
        concurrency_policy="allow",
        misfire_policy="catch_up",
        catch_up_max=5,
    )
    assert cron.next_fire_at == T0 + 1
    now = T0 + 3 * 86400 + 0.5
    fires = Scheduler(app.runtime, misfire_grace=0).tick(now)
    assert [f.fire_at - T0 for f in fires] == [3 * 86400 - 4 + i for i in range(5)]
    assert crons.get(cron.cron_id).next_fire_at == T0 + 3 * 86400 + 1


def test_pause_stops_firing_and_resume_hands_the_missed_ones_to_the_misfire_policy(
    app: App, crons: Crons, clock: FakeClock
) -> None:
    """A paused schedule fires nothing; resumed, the occurrences missed meanwhile follow the
    misfire policy (skip: dropped; run_once: one run) and it goes on."""
    dropped = minutely(crons, "dropped", concurrency_policy="allow")
    once = minutely(crons, "once", concurrency_policy="allow", misfire_policy="run_once")
    scheduler = Scheduler(app.runtime, misfire_grace=30)
    assert len(scheduler.tick(T0 + 60)) == 2
    for cron in (dropped, once):
        paused = crons.pause(cron.cron_id)
        assert paused.paused
        assert crons.pause(cron.cron_id) == paused  # pausing again changes nothing
    for minute in range(2, 7):
        assert scheduler.tick(T0 + 60 * minute + 1) == []
    clock.set(T0 + 400)
    for cron in (dropped, once):
        resumed = crons.unpause(cron.cron_id)
        assert not resumed.paused
        assert resumed.next_fire_at == T0 + 120  # kept: what was missed is the policy's
    fires = scheduler.tick(T0 + 400)
    by_name = {f.cron_id: f.fire_at - T0 for f in fires}
    assert by_name == {once.cron_id: 360}  # run_once: one run for 120 … 360
    assert crons.get(dropped.cron_id).next_fire_at == T0 + 420
    assert [f.fire_at - T0 for f in scheduler.tick(T0 + 420)] == [420, 420]


def test_a_schedule_that_cannot_be_evaluated_stops(app: App, db_url: str) -> None:
    """A stored schedule whose expression no longer parses fires nothing and gets no next
    occurrence (instead of being retried at every tick)."""
    app.store.create_cron("broken", "broken", "slow", "61 * * * *", next_fire_at=T0 + 60)
    assert Scheduler(app.runtime).tick(T0 + 120) == []
    assert app.store.get_cron("broken").next_fire_at is None
    assert sql_rows(db_url, "SELECT COUNT(*) FROM lc_runs")[0][0] == 0


# -- triggers --------------------------------------------------------------------------------


def test_trigger_starts_a_run_now_under_the_concurrency_policy(
    app: App, crons: Crons, clock: FakeClock
) -> None:
    """A trigger starts a run at the current time without moving the schedule; 'skip'
    refuses while a run is active unless forced; 'queue' keys the run; a repeated trigger
    at the same instant is the same trigger."""
    skip = minutely(crons, "skip")
    queue = minutely(crons, "queue", concurrency_policy="queue")
    clock.set(T0 + 10)
    fire = crons.trigger(skip.cron_id)
    assert (fire.fire_at, fire.outcome) == (T0 + 10, FireOutcome.TRIGGERED)
    assert crons.trigger(skip.cron_id) == fire
    clock.set(T0 + 20)
    refused = crons.trigger(skip.cron_id)
    assert (refused.outcome, refused.run_id) == (FireOutcome.TRIGGER_SKIPPED, None)
    assert crons.trigger(skip.cron_id, force=True) == refused  # the same instant: same trigger
    clock.set(T0 + 21)
    forced = crons.trigger(skip.cron_id, force=True)
    assert (forced.fire_at, forced.outcome) == (T0 + 21, FireOutcome.TRIGGERED)
    assert crons.active_runs(skip.cron_id) == 2
    after = crons.get(skip.cron_id)
    assert (after.next_fire_at, after.execution_count, after.last_fire_at) == (T0 + 60, 2, T0 + 21)

    queued = crons.trigger(queue.cron_id)
    assert queued.run_id is not None
    assert app.store.get_run(queued.run_id).concurrency_key == f"cron:{queue.cron_id}"
    # The schedule's own occurrence still fires (behind the triggered run, for 'queue').
    fires = Scheduler(app.runtime).tick(T0 + 60)
    assert {(f.cron_id, f.outcome) for f in fires} == {
        (skip.cron_id, FireOutcome.SKIPPED),
        (queue.cron_id, FireOutcome.FIRED),
    }


# -- daylight saving through the scheduler --------------------------------------------------------


def test_ticking_across_daylight_saving_changes_fires_each_occurrence_once(db_url: str) -> None:
    """Ticking every five minutes through Berlin's spring-forward and New York's fall-back
    nights: '30 2 * * *' Berlin fires at 03:00 CEST, '30 1 * * *' New York once at 01:30
    EDT, '*/15 * * * *' New York every 15 real minutes through the repeated hour."""
    start = utc("2026-03-28T22:00:00")
    with App(db_url, clock=FakeClock(start)) as app:
        app.workflow("slow")(lambda data=None: data)
        crons = Crons(app.runtime, app.workflows)
        berlin = crons.create("berlin", "slow", "30 2 * * *", timezone="Europe/Berlin")
        crons.update(berlin.cron_id, concurrency_policy="allow")
        scheduler = Scheduler(app.runtime, misfire_grace=600)
        spring = [f.fire_at for t in range(0, 6 * 3600, 300) for f in scheduler.tick(start + t)]
        assert spring == [utc("2026-03-29T01:00:00")]

    start = utc("2026-10-31T22:00:00")
    with App(db_url, clock=FakeClock(start)) as app:
        app.workflow("slow")(lambda data=None: data)
        crons = Crons(app.runtime, app.workflows)
        once = crons.create(
            "ny-once", "slow", "30 1 * * *", timezone="America/New_York", concurrency_policy="allow"
        )
        quarter = crons.create(
            "ny-quarter",
            "slow",
            "*/15 * * * *",
            timezone="America/New_York",
            concurrency_policy="allow",
        )
        scheduler = Scheduler(app.runtime, misfire_grace=600)
        fires = [f for t in range(0, 12 * 3600, 300) for f in scheduler.tick(start + t)]
    once_fires = [f.fire_at for f in fires if f.cron_id == once.cron_id]
    assert once_fires == [utc("2026-11-01T05:30:00")]  # 01:30 EDT
    quarter_fires = [f.fire_at for f in fires if f.cron_id == quarter.cron_id]
    assert quarter_fires == [start + 900 * i for i in range(1, 48)]
    assert all(f.outcome is FireOutcome.FIRED for f in fires)


# -- the scheduler loop ----------------------------------------------------------------------------


def test_run_fires_as_the_clock_moves_and_stops_when_asked(
    app: App, crons: Crons, clock: FakeClock
) -> None:
    """Scheduler.run ticks on its own: moving the clock past an occurrence and waking it
    starts the run; setting stop ends the loop."""
    cron = minutely(crons, concurrency_policy="allow")
    scheduler = Scheduler(app.runtime, poll=0.05)

    async def scenario() -> list[CronFire]:
        stop = asyncio.Event()
        loop = asyncio.create_task(scheduler.run(stop))
        await asyncio.sleep(0.1)
        assert await app.in_thread(crons.fires, cron.cron_id) == []
        clock.set(T0 + 60)
        scheduler.wake()
        for _ in range(200):
            fires = await app.in_thread(crons.fires, cron.cron_id)
            if fires:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(loop, 5)
        return fires

    fires = asyncio.run(scenario())
    assert [f.fire_at for f in fires] == [T0 + 60]
    assert scheduler.claimed == 1


def test_sync_calls_inside_an_event_loop_name_the_async_method(app: App, crons: Crons) -> None:
    """crons.create() and scheduler.tick() refuse to block a running loop; the *_async
    forms work there."""
    from longcall.errors import SyncInAsyncError

    async def scenario() -> Cron:
        with pytest.raises(SyncInAsyncError, match="create_async"):
            crons.create("x", "slow", "* * * * *")
        with pytest.raises(SyncInAsyncError, match="tick"):
            Scheduler(app.runtime).tick()
        made = await crons.create_async("x", "slow", "* * * * *")
        assert await crons.get_async(made.cron_id) == made
        assert [c.name for c in await crons.list_async()] == ["x"]
        edited = await crons.update_async(made.cron_id, paused=True)
        fire = await crons.trigger_async(made.cron_id)
        assert fire.outcome is FireOutcome.TRIGGERED
        assert await crons.fires_async(made.cron_id) == [fire]
        assert await crons.delete_async(made.cron_id)
        return edited

    assert asyncio.run(scenario()).paused


def test_a_fired_schedule_wakes_the_run_worker_at_once(db_url: str) -> None:
    """A run a schedule starts is taken at once (a notification on PostgreSQL, the in-process
    wake-up on SQLite), not at the worker's next poll, here 30 s away."""
    with App(db_url) as app:

        @app.workflow("ping")
        def ping(_: None) -> str:
            return "pong"

        cron = app.crons.create("pinger", "ping", "0 0 1 1 *")

        async def main() -> float:
            stop = asyncio.Event()
            worker = app.run_worker(concurrency=1, poll_interval="30s")
            running = asyncio.create_task(worker.run(stop))
            await asyncio.sleep(0.5)  # idle: its first claim found nothing
            started = asyncio.get_running_loop().time()
            fire = await app.in_thread(app.crons.trigger, cron.cron_id)
            assert fire.run_id is not None
            try:
                while not (await app.in_thread(app.store.get_run, fire.run_id)).status.terminal:
                    assert asyncio.get_running_loop().time() - started < 10, "not woken"
                    await asyncio.sleep(0.02)
                return asyncio.get_running_loop().time() - started
            finally:
                stop.set()
                await running

        assert asyncio.run(main()) < 10
