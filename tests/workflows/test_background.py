"""Background runs in one process: retries from checkpoints, per-attempt timeouts, a run doing
a long-running tool's job, idempotent submission, waking a worker, answers and cancels.

A :class:`~longcall.workflows.run_worker.RunWorker` runs in this process (:func:`drain`) until the
runs a test waits on have ended; on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

from longcall import (
    App,
    JobHandle,
    JobState,
    RetryPolicy,
    Rule,
    RunStatus,
    ScriptedAgent,
    job_id_for,
)
from longcall.errors import StoreUnavailable, WorkflowNotFound
from longcall.testing.scripted import FINAL_STATUSES
from longcall.workflows import TaskContext

from .bg_procs import sql_rows, watch_locks

CANCELLED = {"type": "Cancelled", "message": "the run was cancelled"}


# u1's report job: the tool's key in u1's namespace.
REPORT = job_id_for("report:sales", "u1")


def background_app(url: str) -> App:
    return App(url, run_lease="2s", run_retry="50ms")


def counting_claims(app: App) -> list[int]:
    """The claims the app's workers make by themselves (not in the statement ending a run),
    as they happen: the number of runs each one took."""
    claims: list[int] = []
    claim_runs = app.store.claim_runs

    def counted(*args: Any, **kwargs: Any) -> Any:
        claimed = claim_runs(*args, **kwargs)
        claims.append(len(claimed))
        return claimed

    app.store.claim_runs = counted  # type: ignore[method-assign]
    return claims


def drain(app: App, run_ids: list[str], *, seconds: float = 30, **options: Any) -> float:
    """Run a RunWorker here until every run in ``run_ids`` has ended; the seconds it took."""
    settings = {"concurrency": 4, "poll_interval": "50ms", "grace": "1s", **options}

    async def main() -> float:
        stop = asyncio.Event()
        worker = app.run_worker(**settings)
        started = time.monotonic()
        running = asyncio.create_task(worker.run(stop))
        try:
            while True:
                runs = [await app.in_thread(app.store.get_run, r) for r in run_ids]
                if all(r.status.terminal for r in runs):
                    return time.monotonic() - started
                assert not running.done(), running
                assert time.monotonic() - started < seconds, [r.status for r in runs]
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await running

    return asyncio.run(main())


def final_responses(agent: ScriptedAgent, session_id: str, call_id: str) -> list[dict[str, Any]]:
    """The closing function responses the session holds for ``call_id``."""
    history = asyncio.run(agent.history(session_id))
    return [
        r.response
        for event in history
        if event.author == "user"
        for r in event.function_responses
        if r.id == call_id and r.response.get("status") in FINAL_STATUSES
    ]


# -- retries resume from the checkpoint ---------------------------------------------------


def retrying_app(
    url: str, failures: int, *, is_async: bool, retry: RetryPolicy | None = None
) -> tuple[App, Counter[str]]:
    """``retrying(x)`` = ``flaky(fetch(x))``; ``flaky`` raises on its first ``failures`` calls."""
    app = background_app(url)
    calls: Counter[str] = Counter()

    @app.task(name="fetch")
    def fetch(x: int) -> int:
        calls["fetch"] += 1
        return x + 1

    def flaky_body(x: int) -> int:
        calls["flaky"] += 1
        if calls["flaky"] <= failures:
            raise RuntimeError(f"flaky failure {calls['flaky']}")
        return x * 2

    if is_async:

        @app.task(name="flaky", retry=retry)
        async def flaky_async(x: int) -> int:
            return flaky_body(x)

        @app.workflow("retrying")
        async def retrying_async(x: int) -> int:
            return int(await flaky_async(fetch(x)))

    else:
        flaky = app.task(flaky_body, name="flaky", retry=retry)

        @app.workflow("retrying")
        def retrying(x: int) -> int:
            return int(flaky(fetch(x)))

    return app, calls


def flaky_error(failure: int, attempt: int, *, tries: int = 1) -> dict[str, Any]:
    return {
        "type": "TaskError",
        "message": (
            f"task 'flaky' failed after {tries} attempt(s): RuntimeError: flaky failure {failure}"
        ),
        "attempt": attempt,
    }


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_retry_resumes_from_the_checkpoint_until_the_failing_task_succeeds(
    db_url: str, is_async: bool
) -> None:
    """Task 2 fails twice: the run is retried twice, task 1 runs once, and every failed
    attempt's error is on record with its number."""
    app, calls = retrying_app(db_url, 2, is_async=is_async)
    try:
        run = app.submit_run("retrying", 5, max_retries=2)
        assert run.created and run.status is RunStatus.QUEUED
        drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.COMPLETED, details.run.errors
        assert details.run.result == 12
        assert details.run.error is None
        assert details.run.attempts == 2
        assert details.run.executions == 3
        assert details.run.errors == [flaky_error(1, 1), flaky_error(2, 2)]
        assert calls == {"fetch": 1, "flaky": 3}
        assert [(s.position, s.name, s.ok, s.result, s.attempts) for s in details.steps] == [
            (1, "fetch", True, 6, 1),
            (2, "flaky", True, 12, 1),
        ]
    finally:
        app.close()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_exhausted_retries_fail_the_run_with_every_attempts_error(
    db_url: str, is_async: bool
) -> None:
    """Task 2 always fails: after max_retries=2 the run is failed, its three errors listed."""
    app, calls = retrying_app(db_url, 100, is_async=is_async)
    try:
        run = app.submit_run("retrying", 5, max_retries=2)
        drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.FAILED
        assert details.run.result is None
        assert details.run.attempts == 2
        assert details.run.executions == 3
        assert details.run.errors == [flaky_error(1, 1), flaky_error(2, 2), flaky_error(3, 3)]
        assert details.run.error == flaky_error(3, 3)
        assert details.run.finished_at is not None
        assert calls == {"fetch": 1, "flaky": 3}
        assert [(s.position, s.name, s.ok, s.attempts) for s in details.steps] == [
            (1, "fetch", True, 1),
            (2, "flaky", False, 1),
        ]
        assert details.steps[1].result == {
            "error_type": "RuntimeError",
            "message": "flaky failure 3",
            "attempts": 1,
        }
    finally:
        app.close()


def test_task_retries_happen_inside_each_run_attempt(db_url: str) -> None:
    """A task trying twice per run attempt and failing three times: the run's first attempt
    fails after two tries, its retry succeeds at the fourth call."""
    quick = RetryPolicy(max_attempts=2, initial="10ms", maximum="10ms", jitter=False)
    app, calls = retrying_app(db_url, 3, is_async=False, retry=quick)
    try:
        run = app.submit_run("retrying", 1, max_retries=1)
        drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.COMPLETED, details.run.errors
        assert details.run.result == 4
        assert details.run.attempts == 1
        assert details.run.errors == [flaky_error(2, 1, tries=2)]
        assert calls == {"fetch": 1, "flaky": 4}
        assert [(s.name, s.ok, s.attempts) for s in details.steps] == [
            ("fetch", True, 1),
            ("flaky", True, 2),
        ]
    finally:
        app.close()


# -- timeouts -----------------------------------------------------------------------------


def sleepy_app(url: str, *, is_async: bool, slow_calls: int) -> tuple[App, list[float]]:
    """``sleepy(n)``: one task that sleeps 2 s on its first ``slow_calls`` calls."""
    app = background_app(url)
    starts: list[float] = []

    def nap() -> float:
        starts.append(time.monotonic())
        return 2.0 if len(starts) <= slow_calls else 0.0

    if is_async:

        @app.task(name="nap")
        async def nap_async(n: int) -> int:
            await asyncio.sleep(nap())
            return n

        @app.workflow("sleepy")
        async def sleepy_async(n: int) -> int:
            return int(await nap_async(n))

    else:

        @app.task(name="nap")
        def nap_sync(n: int) -> int:
            time.sleep(nap())
            return n

        @app.workflow("sleepy")
        def sleepy(n: int) -> int:
            return int(nap_sync(n))

    return app, starts


def timeout_error(attempt: int) -> dict[str, Any]:
    return {"type": "Timeout", "message": "the attempt ran over 0.3s", "attempt": attempt}


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_each_attempt_over_its_timeout_fails_and_the_last_fails_the_run(
    db_url: str, is_async: bool
) -> None:
    """timeout=300ms on a task sleeping 2 s: each attempt fails with a Timeout, is retried,
    and after max_retries the run is failed; the cut-off attempts record nothing."""
    app, starts = sleepy_app(db_url, is_async=is_async, slow_calls=100)
    try:
        run = app.submit_run("sleepy", 3, max_retries=2, timeout="300ms")
        assert run.timeout_secs == pytest.approx(0.3)
        took = drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert took < 2, "the attempts waited for the task instead of timing out"
        assert details.status is RunStatus.FAILED
        assert details.run.attempts == 2
        assert details.run.errors == [timeout_error(1), timeout_error(2), timeout_error(3)]
        assert details.run.error == timeout_error(3)
        assert len(starts) == 3
        assert details.steps == []
        # A sync task cannot be interrupted: it sleeps on in its thread, and when it returns
        # it must not write to the run it lost.
        time.sleep(max(0.0, 2.2 - (time.monotonic() - starts[-1])))
        later = app.get_run(run.run_id)
        assert later.steps == []
        assert later.run == details.run
    finally:
        app.close()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_an_attempt_over_its_timeout_is_retried_and_the_retry_completes(
    db_url: str, is_async: bool
) -> None:
    """The first attempt sleeps past the timeout, the retry is quick: completed, one error."""
    app, starts = sleepy_app(db_url, is_async=is_async, slow_calls=1)
    try:
        run = app.submit_run("sleepy", 3, max_retries=1, timeout="300ms")
        took = drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert took < 2
        assert details.status is RunStatus.COMPLETED, details.run.errors
        assert details.run.result == 3
        assert details.run.attempts == 1
        assert details.run.errors == [timeout_error(1)]
        assert details.run.error is None
        assert len(starts) == 2
        assert [(s.name, s.ok, s.result) for s in details.steps] == [("nap", True, 3)]
    finally:
        app.close()


# -- a long-running tool whose work is a background run -----------------------------------


def report_app(url: str, *, fail: bool = False) -> tuple[App, ScriptedAgent, list[str]]:
    """A ``report`` tool whose body submits a ``report_wf`` run with its job, and an agent."""
    app = background_app(url)
    submitted: list[str] = []

    @app.task(name="compile_report")
    def compile_report(q: str) -> int:
        if fail:
            raise RuntimeError(f"no data for {q}")
        return len(q)

    @app.workflow("report_wf")
    def report_wf(request: dict[str, str]) -> dict[str, Any]:
        return {"q": request["q"], "pages": compile_report(request["q"])}

    @app.long_running(key="report:{q}")
    def report(q: str, job: JobHandle) -> str:
        """Writes a report."""
        run = app.submit_run("report_wf", {"q": q}, job=job)
        assert run.created
        submitted.append(run.run_id)
        return f"The report is queued as {run.run_id}."

    rules = [Rule(r"report on (\w+)", calls=[("report", lambda m: {"q": m.group(1)})])]
    return app, ScriptedAgent(app, rules=rules), submitted


def ask_for_report(app: App, agent: ScriptedAgent, session_id: str) -> str:
    """Play the user's turn; the id of the call the agent made."""
    events = app.run_turn(agent, user_id="u1", session_id=session_id, text="report on sales")
    (call,) = [c for e in events for c in e.function_calls]
    (pending,) = [r.response for e in events for r in e.function_responses]
    assert pending["status"] == "pending", pending
    assert pending["jobId"] == REPORT
    return call.id


def test_a_run_doing_a_tools_job_completes_it_and_the_agent_hears_once(db_url: str) -> None:
    """The run's result completes the tool's job, and the resumer hands the agent one
    function response carrying it."""
    app, agent, submitted = report_app(db_url)
    try:
        call_id = ask_for_report(app, agent, "s1")
        (run_id,) = submitted
        run = app.get_run(run_id).run
        assert (run.status, run.job_id, run.user_id) == (RunStatus.QUEUED, REPORT, "u1")
        assert app.get_job(REPORT).state is JobState.STARTED

        drain(app, [run_id])
        assert app.get_run(run_id).run.result == {"q": "sales", "pages": 5}
        job = app.get_job(REPORT)
        assert job.state is JobState.SUCCEEDED
        assert job.result == {"q": "sales", "pages": 5}
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        assert asyncio.run(app.deliverer(agent).run_once()) == 0
        assert final_responses(agent, "s1", call_id) == [
            {"status": "succeeded", "jobId": REPORT, "result": {"q": "sales", "pages": 5}}
        ]
        assert submitted == [run_id]
    finally:
        app.close()


def test_a_failed_run_fails_the_tools_job_and_the_agent_hears_once(db_url: str) -> None:
    """The run fails (no retries): its job fails with the run's error, delivered once."""
    app, agent, submitted = report_app(db_url, fail=True)
    try:
        call_id = ask_for_report(app, agent, "s1")
        drain(app, submitted)
        (run_id,) = submitted
        assert app.get_run(run_id).status is RunStatus.FAILED
        job = app.get_job(REPORT)
        assert job.state is JobState.FAILED
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        assert asyncio.run(app.deliverer(agent).run_once()) == 0
        (response,) = final_responses(agent, "s1", call_id)
        assert response["status"] == "failed"
        assert response["jobId"] == REPORT
        assert "no data for sales" in response["error"]
    finally:
        app.close()


def test_a_worker_running_during_the_turn_delivers_the_runs_result_once(db_url: str) -> None:
    """With a whole Worker (runs and resumer) already going when the tool submits the run,
    the result still reaches the session exactly once."""
    app, agent, submitted = report_app(db_url)
    loop = asyncio.new_event_loop()
    worker = app.worker(agent, poll_interval="50ms", sweep_interval="1s", dispatch_interval="1s")
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(worker.run(handle_signals=False))
    )
    thread.start()
    try:
        call_id = ask_for_report(app, agent, "s1")
        give_up = time.monotonic() + 30
        while not final_responses(agent, "s1", call_id):
            assert time.monotonic() < give_up, app.get_job(REPORT)
            time.sleep(0.05)
        time.sleep(0.5)  # a second delivery would have come by now
    finally:
        loop.call_soon_threadsafe(worker.stop)
        thread.join(30)
        loop.close()
    try:
        assert not thread.is_alive()
        assert final_responses(agent, "s1", call_id) == [
            {"status": "succeeded", "jobId": REPORT, "result": {"q": "sales", "pages": 5}}
        ]
        (run_id,) = submitted
        assert app.get_run(run_id).status is RunStatus.COMPLETED
    finally:
        app.close()


def test_a_queued_run_doing_a_job_reports_nothing_without_a_worker(db_url: str) -> None:
    """No RunWorker: the run stays queued, the job started, and the agent hears nothing."""
    app, agent, submitted = report_app(db_url)
    try:
        call_id = ask_for_report(app, agent, "s1")
        time.sleep(0.3)
        assert asyncio.run(app.deliverer(agent).run_once()) == 0
        (run_id,) = submitted
        run = app.get_run(run_id).run
        assert (run.status, run.executions, run.holder, run.finished_at) == (
            RunStatus.QUEUED,
            0,
            None,
            None,
        )
        assert app.get_job(REPORT).state is JobState.STARTED
        assert final_responses(agent, "s1", call_id) == []
    finally:
        app.close()


def test_cancelling_a_queued_run_doing_a_job_ends_the_job_and_tells_the_agent(
    db_url: str,
) -> None:
    """A run doing a job, cancelled before a worker took it, ends the job cancelled (its end
    is the job's end) and the agent hears so once."""
    app, agent, submitted = report_app(db_url)
    try:
        call_id = ask_for_report(app, agent, "s1")
        (run_id,) = submitted
        assert app.cancel_run(run_id).status is RunStatus.CANCELLED
        assert app.get_job(REPORT).state is JobState.CANCELLED
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        (response,) = final_responses(agent, "s1", call_id)
        assert response["status"] == "cancelled"
    finally:
        app.close()


def test_cancelling_a_running_run_doing_a_job_ends_the_job_and_tells_the_agent(
    db_url: str,
) -> None:
    """A run doing a job, cancelled while a worker runs it, ends the job cancelled and the
    agent hears so once."""
    app = background_app(db_url)
    entered, release = threading.Event(), threading.Event()

    @app.task(name="slow_part")
    def slow_part() -> int:
        entered.set()
        release.wait(30)
        return 1

    @app.workflow("slow_report")
    def slow_report(_: None) -> int:
        return int(slow_part()) + int(slow_part())

    @app.long_running(key="slow:{q}")
    def slow(q: str, job: JobHandle) -> str:
        """Writes slowly."""
        app.submit_run("slow_report", None, job=job)
        return "queued"

    agent = ScriptedAgent(app, rules=[Rule("slow", calls=[("slow", {"q": "x"})])])
    try:
        events = app.run_turn(agent, user_id="u1", session_id="s1", text="slow please")
        (call,) = [c for e in events for c in e.function_calls]
        (run_id,) = [r[0] for r in sql_rows(db_url, "SELECT run_id FROM lc_runs")]

        def cancel_when_entered() -> None:
            assert entered.wait(30)
            assert app.cancel_run(run_id).status is RunStatus.RUNNING
            release.set()

        canceller = threading.Thread(target=cancel_when_entered)
        canceller.start()
        try:
            drain(app, [run_id])
        finally:
            release.set()
            canceller.join(30)
        details = app.get_run(run_id)
        assert details.status is RunStatus.CANCELLED
        assert [s.name for s in details.steps] == ["slow_part"]
        assert app.get_job(job_id_for("slow:x", "u1")).state is JobState.CANCELLED
        assert asyncio.run(app.deliverer(agent).run_once()) == 1
        (response,) = final_responses(agent, "s1", call.id)
        assert response["status"] == "cancelled"
    finally:
        app.close()


# -- submitting --------------------------------------------------------------------------


def test_the_same_idempotency_key_returns_the_same_run(db_url: str) -> None:
    """A second submit with the key returns the first run (created False), input and all."""
    app = background_app(db_url)

    @app.workflow("echo")
    def echo(text: str) -> str:
        return text

    try:
        first = app.submit_run("echo", "one", idempotency_key="k1")
        assert first.created
        again = app.submit_run("echo", "two", idempotency_key="k1")
        assert not again.created
        assert again.run_id == first.run_id
        assert again.input == "one"
        assert again.idempotency_key == "k1"
        other = app.submit_run("echo", "two", idempotency_key="k2")
        assert other.created and other.run_id != first.run_id
        assert sql_rows(db_url, "SELECT COUNT(*) FROM lc_runs") == [(2,)]
        drain(app, [first.run_id, other.run_id])
        assert app.get_run(first.run_id).run.result == "one"
        third = app.submit_run("echo", "three", idempotency_key="k1")
        assert third == app.get_run(first.run_id).run and not third.created
    finally:
        app.close()


def test_an_unknown_workflow_is_refused_and_no_run_is_made(db_url: str) -> None:
    """Submitting a workflow nobody registered raises WorkflowNotFound and stores nothing."""
    app = background_app(db_url)
    try:
        with pytest.raises(WorkflowNotFound) as raised:
            app.submit_run("nowhere", {"x": 1}, idempotency_key="k1")
        assert raised.value.workflow_id == "nowhere"
        assert sql_rows(db_url, "SELECT COUNT(*) FROM lc_runs") == [(0,)]
    finally:
        app.close()


def test_a_run_submitted_without_a_worker_stays_queued(db_url: str) -> None:
    """Nobody executes a submitted run until a worker runs: it stays queued, untouched."""
    app = background_app(db_url)
    ran: list[int] = []

    @app.task(name="note")
    def note(n: int) -> int:
        ran.append(n)
        return n

    @app.workflow("noted")
    def noted(n: int) -> int:
        return int(note(n))

    try:
        run = app.submit_run("noted", 4)
        time.sleep(0.3)
        details = app.get_run(run.run_id)
        assert details.run == run
        assert details.status is RunStatus.QUEUED
        assert (details.run.executions, details.run.result, details.run.finished_at) == (
            0,
            None,
            None,
        )
        assert details.steps == []
        assert ran == []
        drain(app, [run.run_id])
        assert app.get_run(run.run_id).run.result == 4
        assert ran == [4]
    finally:
        app.close()


# -- waking the worker -------------------------------------------------------------------


def test_a_worker_with_a_free_slot_takes_the_next_queued_run_without_waiting_a_poll(
    db_url: str,
) -> None:
    """Three quick runs on a worker with one slot and a 2 s poll: each starts as soon as the
    one before has ended, not at the next poll."""
    app = background_app(db_url)

    @app.workflow("quick")
    def quick(n: int) -> int:
        return n

    try:
        ids = [app.submit_run("quick", n).run_id for n in range(3)]
        took = drain(app, ids, concurrency=1, poll_interval="2s")
        assert [app.get_run(r).run.result for r in ids] == [0, 1, 2]
        assert took < 1.5, "the worker idled with a free slot until its next poll"
    finally:
        app.close()


async def settled(app: App, url: str, claims: list[int]) -> int:
    """Wait until a worker just started has made its start-up claims: the one as it starts
    and, on PostgreSQL, the one as it takes the watch (for runs queued while nobody
    listened). A run submitted before then races them, and one of the two claims it while
    the other comes back empty. The number of claims made by then."""
    for _ in range(250):
        listening = url.startswith("sqlite:") or await app.in_thread(watch_locks, url) == 1
        if claims and listening:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the worker did not start listening within 5 s")
    while True:  # the claim the watch started, if it has not returned yet
        made = len(claims)
        await asyncio.sleep(0.1)
        if len(claims) == made:
            return made


def test_a_worker_does_not_look_again_for_runs_the_statement_ending_a_run_looked_for(
    db_url: str,
) -> None:
    """Six runs submitted one after another to a running worker with a 30 s poll: each
    submit wakes it to claim once, and each run's end looks for the next in its own
    statement, so no claim after the start-up ones comes back empty."""
    app = background_app(db_url)
    claims = counting_claims(app)

    @app.workflow("quick")
    def quick(n: int) -> int:
        return n

    async def main() -> int:
        stop = asyncio.Event()
        running = asyncio.create_task(app.run_worker(poll_interval="30s").run(stop))
        try:
            at_start = await settled(app, db_url, claims)
            for n in range(6):
                run = await app.in_thread(app.submit_run, "quick", n)
                for _ in range(250):
                    if (await app.in_thread(app.store.get_run, run.run_id)).status.terminal:
                        break
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.05)  # time for a needless claim after the end
            return at_start
        finally:
            stop.set()
            await running

    try:
        at_start = asyncio.run(main())
        assert claims[at_start:] == [1] * 6, claims
    finally:
        app.close()


# -- answers -----------------------------------------------------------------------------


def test_a_background_run_waits_for_input_and_a_worker_resumes_it_once_answered(
    db_url: str,
) -> None:
    """A run asks a question on a worker; submit_answers queues it and a worker finishes it
    from its checkpoints."""
    app = background_app(db_url)
    calls: Counter[str] = Counter()

    @app.task(name="prepare")
    def prepare(n: int) -> int:
        calls["prepare"] += 1
        return n * 2

    @app.workflow("asking")
    def asking(n: int, ctx: TaskContext) -> str:
        doubled = prepare(n)
        name = ctx.interrupt("Name?", schema=str)
        return f"{name}:{doubled}"

    async def wait_until_waiting(run_id: str) -> None:
        stop = asyncio.Event()
        worker = app.run_worker(concurrency=2, poll_interval="50ms")
        running = asyncio.create_task(worker.run(stop))
        try:
            give_up = time.monotonic() + 30
            while (await app.in_thread(app.store.get_run, run_id)).status in (
                RunStatus.QUEUED,
                RunStatus.RUNNING,
            ):
                assert time.monotonic() < give_up
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await running

    try:
        run = app.submit_run("asking", 21)
        asyncio.run(wait_until_waiting(run.run_id))
        waiting = app.get_run(run.run_id)
        assert waiting.status is RunStatus.WAITING_INPUT
        assert [i.key for i in waiting.pending] == ["interrupt-1"]
        queued = app.submit_answers(run.run_id, {"interrupt-1": "ada"})
        assert queued.status is RunStatus.QUEUED
        drain(app, [run.run_id])
        details = app.get_run(run.run_id)
        assert details.status is RunStatus.COMPLETED
        assert details.run.result == "ada:42"
        assert calls == {"prepare": 1}
        assert details.run.executions == 2
    finally:
        app.close()


# -- holding a run -----------------------------------------------------------------------


def test_one_failed_lease_renewal_does_not_stop_the_heartbeat(db_url: str) -> None:
    """A renewal that fails once (the database hiccups) is not the last: the lease is still
    renewed during a long task, so a second worker never takes the run over and the task
    runs once."""
    calls: list[str] = []
    entered = threading.Event()

    def worker_app(name: str) -> App:
        app = App(db_url, run_lease="900ms", run_retry="50ms")

        @app.task(name="long_task")
        def long_task() -> str:
            calls.append(name)
            entered.set()
            time.sleep(2.5)
            return name

        @app.workflow("long_wf")
        def long_wf(_: None) -> str:
            return str(long_task())

        return app

    apps = [first, second] = [worker_app("first"), worker_app("second")]
    real_renew = first.store.renew_runs
    hiccups = [StoreUnavailable("the database hiccuped")]

    def renew_once_failing(*args: Any, **kwargs: Any) -> dict[tuple[str, str], bool]:
        if hiccups:
            raise hiccups.pop()
        return real_renew(*args, **kwargs)

    first.store.renew_runs = renew_once_failing  # type: ignore[method-assign]

    async def main(run_id: str) -> None:
        stop = asyncio.Event()
        one = first.run_worker(concurrency=1, poll_interval="50ms")
        one_running = asyncio.create_task(one.run(stop))
        assert await asyncio.to_thread(entered.wait, 30)  # the first holds it, in its task
        other = asyncio.create_task(
            second.run_worker(concurrency=1, poll_interval="50ms").run(stop)
        )
        give_up = time.monotonic() + 30
        try:
            while not (await first.in_thread(first.store.get_run, run_id)).status.terminal:
                assert time.monotonic() < give_up
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.gather(one_running, other)

    try:
        run = first.submit_run("long_wf", None)
        asyncio.run(main(run.run_id))
        details = first.get_run(run.run_id)
        assert hiccups == []
        assert calls == ["first"], "the run was taken over while its holder was still at it"
        assert details.status is RunStatus.COMPLETED
        assert details.run.result == "first"
        assert details.run.executions == 1
    finally:
        for app in apps:
            app.close()
