"""Job ids per user: nobody's job blocks or answers another user's tool call (issue 21, item 4).

A keyed tool called for a user gets ``key@<16 hex of sha256(user)>``
(:func:`longcall.job_id_for`); a job the same user made under the bare key before ids were
namespaced is still found; one job per (user, session, call).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator

import pytest

import longcall
from longcall import CallIds, JobState, Message, job_id_for
from longcall.errors import AttachConflict
from longcall.store.base import NewJob

KEY = "report:{quarter}:{region}"
BARE = "report:2026-Q4:EMEA"
ARGS = {"quarter": "2026-Q4", "region": "EMEA"}
ANA = CallIds("reports", "ana", "session-ana-1", "call-ana-1", "inv-ana-1")


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


def report_tool(app: longcall.App, started: list[str]) -> longcall.LongRunningTool:
    @app.long_running(key=KEY)
    def report(quarter: str, region: str, job: longcall.JobHandle) -> str:
        """Builds a report."""
        started.append(job.id)
        return "building"

    return report


def squat(app: longcall.App, job_id: str, user: str | None) -> longcall.Job:
    """A job made behind the tool's back (a user's POST /v1/jobs, an admin, an old version)."""
    new = NewJob(job_id, "report", {}, CallIds(user_id=user), None, cancel_hook=False)
    job, created = app.store.create_job(new, holder="squatter", dispatch_lease=0, dispatch=False)
    assert created
    return job


def test_job_id_for_is_the_key_and_sixteen_hex_of_the_users_sha256() -> None:
    """The documented rule: key@ + the first 16 hex characters of sha256(user id, UTF-8)."""
    digest = hashlib.sha256("Zoë".encode()).hexdigest()[:16]
    assert job_id_for("report:Q4", "Zoë") == f"report:Q4@{digest}"
    assert job_id_for("report:Q4", None) == "report:Q4"
    assert job_id_for("k", "ana") != job_id_for("k", "bob")
    suffix = job_id_for("k", "ana").removeprefix("k@")
    assert len(suffix) == 16 and suffix == suffix.lower() and int(suffix, 16) >= 0


def test_a_squatted_bare_key_does_not_block_anas_tool(app: longcall.App) -> None:
    """Mallory's job under the bare key: Ana's body still runs and her job is hers."""
    squat(app, BARE, "mallory")
    started: list[str] = []
    answer = report_tool(app, started).invoke(ARGS, ANA)
    assert answer["status"] == "pending" and answer["message"] == "building"
    assert started == [answer["jobId"]] == [job_id_for(BARE, "ana")]
    job = app.get_job(answer["jobId"])
    assert (job.user_id, job.session_id, job.call_id) == ("ana", ANA.session_id, ANA.call_id)
    assert app.get_job(BARE).user_id == "mallory"


def test_mallorys_own_id_for_the_key_does_not_block_ana(app: longcall.App) -> None:
    """Mallory's namespaced job of the same key (what her POST /v1/jobs makes) is not Ana's."""
    squat(app, job_id_for(BARE, "mallory"), "mallory")
    started: list[str] = []
    answer = report_tool(app, started).invoke(ARGS, ANA)
    assert started == [answer["jobId"]] == [job_id_for(BARE, "ana")]


def test_a_strangers_job_under_anas_id_is_never_answered_as_hers(app: longcall.App) -> None:
    """A job written into Ana's namespace by someone else (an admin) gets an error map: never
    its pending state, its id, or its result."""
    squat(app, job_id_for(BARE, "ana"), "mallory")
    started: list[str] = []
    answer = report_tool(app, started).invoke(ARGS, ANA)
    assert answer["status"] == "error" and "jobId" not in answer
    assert started == []


def test_the_same_users_bare_id_job_is_found_after_an_upgrade(app: longcall.App) -> None:
    """A job Ana's call made before ids were namespaced (the bare key) is her call's job: the
    body does not run again and no namespaced twin appears."""
    squat(app, BARE, "ana")
    started: list[str] = []
    answer = report_tool(app, started).invoke(ARGS, ANA)
    assert answer["status"] == "pending" and answer["jobId"] == BARE
    assert started == []
    assert [j.job_id for j in app.list_jobs()] == [BARE]
    assert app.get_job(BARE).call_id == ANA.call_id  # the repeat joined it to her call


def test_calls_without_a_user_keep_the_bare_key(app: longcall.App) -> None:
    """Library use without users: the key is the id, and a repeat finds the same job."""
    started: list[str] = []
    tool = report_tool(app, started)
    first = tool.invoke(ARGS)
    again = tool.invoke(ARGS)
    assert first["jobId"] == again["jobId"] == BARE and started == [BARE]


def test_a_call_is_unique_per_user_and_session(app: longcall.App) -> None:
    """Two users may each have (s1, c1); the same user's second job for it is refused; jobs
    without a user stay unique among themselves."""

    def make(job_id: str, user: str | None) -> None:
        new = NewJob(job_id, "t", {}, CallIds(None, user, "s1", "c1"), None)
        app.store.create_job(new, holder="h", dispatch_lease=0, dispatch=False)

    make("a1", "ana")
    make("b1", "bob")
    with pytest.raises(AttachConflict):
        make("a2", "ana")
    make("n1", None)
    with pytest.raises(AttachConflict):
        make("n2", None)
    assert {j.job_id for j in app.list_jobs(session_id="s1")} == {"a1", "b1", "n1"}


def test_mallorys_result_never_reaches_anas_session(app: longcall.App) -> None:
    """Mallory's job on Ana's (session, call) id: Ana's session gets only Ana's result; the
    scripted agent holds no such call for Mallory, so hers is orphaned."""
    agent = longcall.ScriptedAgent(
        app, app_name="reports", rules=[longcall.Rule("report", calls=[("report", ARGS)])]
    )
    started: list[str] = []
    report_tool(app, started)

    async def scenario() -> list[str]:
        events = [
            e
            async for e in agent.run(
                user_id="ana", session_id="s-ana", message=Message("the EMEA report")
            )
        ]
        call_id = next(c.id for e in events for c in e.function_calls)
        mallory = NewJob(BARE, "report", {}, CallIds("reports", "mallory", "s-ana", call_id), None)
        await app.in_thread(
            app.store.create_job, mallory, holder="m", dispatch_lease=0, dispatch=False
        )
        await app.complete_async(BARE, {"url": "evil"})
        await app.complete_async(started[0], {"url": "good"})
        deliverer = app.deliverer(agent)
        while await deliverer.run_once():
            pass
        return [e.text or "" for e in await agent.transcript(user_id="ana", session_id="s-ana")]

    texts = asyncio.run(scenario())
    assert any("good" in t for t in texts) and not any("evil" in t for t in texts)
    assert app.get_job(started[0]).delivery is longcall.Delivery.DELIVERED
    mallorys = app.get_job(BARE)
    assert mallorys.state is JobState.SUCCEEDED
    assert mallorys.delivery is longcall.Delivery.ORPHANED
    assert asyncio.run(agent.transcript(user_id="mallory", session_id="s-ana")) == []
