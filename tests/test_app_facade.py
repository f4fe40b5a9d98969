"""The App's operator-facing parts: jobs made for work outside Python, app.monitor and
app.access, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import longcall
from longcall import CallIds, JobHandle, JobState
from longcall.core.webhook_secrets import new_secret
from longcall.errors import AttachConflict
from longcall.jobs.dispatcher import Dispatcher


@pytest.fixture
def app(db_url: str, clock: longcall.FakeClock) -> Iterator[longcall.App]:
    with longcall.App(db_url, clock=clock) as app:
        yield app


def test_a_keyed_job_lives_in_its_users_namespace_and_is_made_once(app: longcall.App) -> None:
    ids = CallIds("reports", "ana", "s1", "call-1")
    job, created = app.create_job("export", {"fmt": "csv"}, key="export:1", ids=ids)
    assert created and job.job_id == longcall.job_id_for("export:1", "ana")
    assert (job.tool_name, job.args, job.state) == ("export", {"fmt": "csv"}, JobState.STARTED)
    again, created_again = app.create_job("export", {"fmt": "csv"}, key="export:1", ids=ids)
    assert (again.job_id, created_again) == (job.job_id, False)
    # Another user's job of the same key is another job.
    bob, _ = app.create_job("export", key="export:1", ids=CallIds(user_id="bob"))
    assert bob.job_id != job.job_id


def test_a_job_id_names_the_job_in_full_and_none_gets_a_fresh_one(app: longcall.App) -> None:
    named, _ = app.create_job("export", job_id="exactly-this")
    assert named.job_id == "exactly-this"
    first, _ = app.create_job("export")
    second, _ = app.create_job("export")
    assert first.job_id != second.job_id


def test_a_deadline_and_a_local_on_cancel_hook_apply(
    app: longcall.App, clock: longcall.FakeClock
) -> None:
    cancelled: list[str] = []

    @app.long_running(on_cancel=lambda job: cancelled.append(job.id))
    def export(job: JobHandle) -> str:
        return "started"

    job, _ = app.create_job("export", deadline="30m")
    assert job.deadline_at == pytest.approx(clock.now() + 1800)
    plain, _ = app.create_job("elsewhere")
    assert plain.deadline_at is None
    app.cancel(job.job_id)
    app.cancel(plain.job_id)
    # Only the job of the tool with a hook queued a call to it.
    assert asyncio.run(Dispatcher(app.jobs).run_once()) == 1
    assert cancelled == [job.job_id]


def test_a_call_with_a_job_already_is_a_conflict(app: longcall.App) -> None:
    ids = CallIds("reports", "ana", "s1", "call-1")
    app.create_job("export", key="a", ids=ids)
    with pytest.raises(AttachConflict):
        app.create_job("export", key="b", ids=ids)


def test_the_monitor_reads_counts_changes_and_problems(app: longcall.App) -> None:
    job, _ = app.create_job("export", key="k", ids=CallIds(user_id="ana"))
    assert app.monitor.job_counts() == {("started", "none"): 1}
    assert [j.job_id for j in app.monitor.changed_jobs(0.0)] == [job.job_id]
    assert app.monitor.last_change() == job.updated_at
    assert app.monitor.problems() == []
    assert app.monitor.workers() == []


def test_access_makes_lists_and_ends_tokens_and_secrets(app: longcall.App) -> None:
    info, token = app.access.create_token(user_id="ana")
    assert app.access.token_info(token) == info
    assert [t.token_id for t in app.access.tokens()] == [info.token_id]
    assert app.access.revoke_token(info.token_id)
    assert app.access.token_info(token) is None
    secret = app.access.add_webhook_secret("billing", new_secret())
    assert [s.secret_id for s in app.access.webhook_secrets("billing")] == [secret.secret_id]
    assert app.access.retire_webhook_secret("billing", secret.secret_id)
    assert app.access.webhook_secrets("billing") == []
