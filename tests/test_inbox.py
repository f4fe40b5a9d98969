"""Deliveries from outside: applied at most once per delivery id, early results kept.

The store side of signed webhooks, on SQLite and PostgreSQL: the delivery id is recorded in the
same transaction as the change it makes, and a result that arrives before its job is applied
when the job is created.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

import longcall
from longcall import CallIds, Delivery, JobState


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    """An App with one tool, ``export``, keyed by its format, with an on_cancel hook."""
    app = longcall.App(db_url, clock=longcall.FakeClock())

    @app.long_running(key="export:{fmt}", on_cancel=lambda job: None)
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    yield app
    app.close()


# The job start() makes: the export key in user u's namespace.
USER_CSV = longcall.job_id_for("export:csv", "u")


def start(app: longcall.App, fmt: str = "csv", *, attached: bool = True) -> str:
    """Start the export job, joined to session s1 and call c-<fmt> unless told otherwise."""
    ids = CallIds("a", "u", "s1", f"c-{fmt}", "inv") if attached else None
    return str(app.tools["export"].invoke({"fmt": fmt}, ids)["jobId"])


def test_completion_applies_once_and_its_repeat_is_a_duplicate(app: longcall.App) -> None:
    """The first delivery completes the job; the same delivery again changes nothing at all."""
    job_id = start(app)
    first = app.ingest(
        source="batch", delivery_id="msg_1", job_id=job_id, kind="complete", payload={"rows": 3}
    )
    assert first.outcome == "applied" and first.job is not None
    assert first.job.state is JobState.SUCCEEDED and first.job.delivery is Delivery.READY
    events_before = app.job_events(job_id)
    again = app.ingest(
        source="batch", delivery_id="msg_1", job_id=job_id, kind="complete", payload={"rows": 999}
    )
    assert again.outcome == "duplicate" and again.job is None
    assert app.get_job(job_id).result == {"rows": 3}
    assert app.job_events(job_id) == events_before  # not even an 'ignored' entry
    assert [(d["delivery_id"], d["outcome"]) for d in app.store.inbox(job_id)] == [
        ("msg_1", "applied")
    ]


def test_a_different_later_result_is_unchanged_and_recorded(app: longcall.App) -> None:
    """Another delivery with a conflicting result: the first result stands, the try is logged."""
    job_id = start(app)
    app.ingest(
        source="batch", delivery_id="m1", job_id=job_id, kind="fail", payload={"error": "disk full"}
    )
    late = app.ingest(
        source="batch", delivery_id="m2", job_id=job_id, kind="complete", payload={"rows": 1}
    )
    assert late.outcome == "unchanged"
    job = app.get_job(job_id)
    assert job.state is JobState.FAILED and job.result == {"error": "disk full"}
    assert [e.kind for e in app.job_events(job_id)] == ["failed", "ignored"]
    assert [d["outcome"] for d in app.store.inbox(job_id)] == ["applied", "unchanged"]


def test_the_same_delivery_id_from_another_source_is_another_delivery(app: longcall.App) -> None:
    """Delivery ids are deduplicated per source, not across sources."""
    job_id = start(app)
    a = app.ingest(source="a", delivery_id="m", job_id=job_id, kind="progress", payload=1)
    b = app.ingest(source="b", delivery_id="m", job_id=job_id, kind="progress", payload=2)
    assert (a.outcome, b.outcome) == ("applied", "applied")
    assert [e.data["data"] for e in app.job_events(job_id)] == [1, 2]


def test_result_before_the_job_exists_is_applied_when_it_is_created(app: longcall.App) -> None:
    """An early completion is kept, the first one wins, and the new job starts out finished."""
    early = app.ingest(
        source="batch", delivery_id="m1", job_id=USER_CSV, kind="complete", payload={"rows": 7}
    )
    assert early.outcome == "early" and early.job is None
    second = app.ingest(
        source="batch", delivery_id="m2", job_id=USER_CSV, kind="fail", payload={"error": "x"}
    )
    assert second.outcome == "early"
    with pytest.raises(longcall.JobNotFound):
        app.get_job(USER_CSV)
    pending = app.tools["export"].invoke({"fmt": "csv"}, CallIds("a", "u", "s1", "c1", "inv"))
    assert pending["status"] == "pending"
    job = app.get_job(USER_CSV)
    assert job.state is JobState.SUCCEEDED and job.result == {"rows": 7}
    assert job.delivery is Delivery.READY  # both halves of the join were there at creation
    claimed = app.store.claim("r", limit=10, lease=30)
    assert [j.job_id for j in claimed] == [USER_CSV]


def test_progress_for_an_unknown_job_is_recorded_not_kept(app: longcall.App) -> None:
    """Progress naming no job is recorded as unknown_job and never applied later."""
    got = app.ingest(
        source="batch", delivery_id="p1", job_id=USER_CSV, kind="progress", payload={"pct": 10}
    )
    assert got.outcome == "unknown_job"
    job_id = start(app)
    job = app.get_job(job_id)
    assert job.state is JobState.STARTED and job.progress is None
    assert [d["outcome"] for d in app.store.inbox(job_id)] == ["unknown_job"]


def test_progress_with_notify_reaches_the_model_side(app: longcall.App) -> None:
    """notify_model on a delivered progress makes the attached job ready for announcement."""
    job_id = start(app)
    got = app.ingest(
        source="batch",
        delivery_id="p1",
        job_id=job_id,
        kind="progress",
        payload={"pct": 50},
        notify_model=True,
    )
    assert got.outcome == "applied" and got.job is not None
    assert got.job.delivery is Delivery.READY and got.job.progress == {"pct": 50}
    quiet = app.ingest(
        source="batch", delivery_id="p2", job_id=job_id, kind="progress", payload={"pct": 60}
    )
    assert quiet.job is not None and quiet.job.notify_seq == got.job.notify_seq


def test_cancel_delivery_asks_the_tool_to_stop(app: longcall.App) -> None:
    """A cancel from outside cancels the job and queues the on_cancel outbox item."""
    job_id = start(app)
    got = app.ingest(
        source="ops",
        delivery_id="c1",
        job_id=job_id,
        kind="cancel",
        payload={"message": "no longer needed"},
    )
    assert got.outcome == "applied" and got.job is not None
    assert got.job.state is JobState.CANCELLED
    assert [i.kind for i in app.store.claim_outbox("d", limit=10, lease=30)] == ["cancel"]


def test_unknown_kind_is_refused_and_changes_nothing(app: longcall.App) -> None:
    """A delivery kind that is not complete, fail, cancel or progress raises ValueError."""
    job_id = start(app)
    with pytest.raises(ValueError, match="unknown delivery kind 'finish'"):
        app.ingest(source="s", delivery_id="d", job_id=job_id, kind="finish", payload=None)
    assert app.store.inbox(job_id) == []


def test_concurrent_repeats_of_one_delivery_apply_once(db_url: str) -> None:
    """Eight threads posting the same progress delivery ten times each: applied exactly once."""
    app = longcall.App(db_url)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    job_id = export.invoke({"fmt": "csv"})["jobId"]
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def post() -> None:
        for _ in range(10):
            got = app.ingest(
                source="batch",
                delivery_id="same",
                job_id=job_id,
                kind="progress",
                payload={"pct": 1},
            )
            with lock:
                outcomes[got.outcome] += 1

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert outcomes == Counter({"applied": 1, "duplicate": 79})
        assert [e.kind for e in app.job_events(job_id)] == ["progress"]
    finally:
        app.close()
