"""The OpenAI Agents SDK adapter against the real SDK with the scripted model: calls pause
the run, results resume it once under the original call id, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

import longcall

oa = pytest.importorskip("longcall.openai_agents", reason="openai-agents is not installed")
from agents import Agent, function_tool, set_tracing_disabled  # noqa: E402

from longcall.agents import Fence, FunctionResponse, Message, TranscriptSource  # noqa: E402
from longcall.core.clock import FakeClock  # noqa: E402
from longcall.core.jobs import CallIds, SessionKey  # noqa: E402
from longcall.errors import ConfigError, FenceLost, UnknownCallError  # noqa: E402

# No trace exporter without an API key: the SDK would warn on every run.
set_tracing_disabled(True)
KEY = SessionKey("exporter", "u", "s")
RULES = [
    longcall.Rule(
        r"export my data to (csv|json)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    ),
    longcall.Rule(
        r"export everything",
        calls=[("export_data", {"export_type": "csv"}), ("export_data", {"export_type": "pdf"})],
    ),
    longcall.Rule(r"hello", reply="Hello! Your export is still on its way."),
]


class Setup:
    """An app, a long-running tool, an SDK agent on the scripted model and its runner."""

    def __init__(
        self,
        db_url: str,
        folder: Path,
        *,
        clock: FakeClock | None = None,
        deadline: str | None = None,
    ) -> None:
        self.app = longcall.App(db_url, clock=clock)
        self.submitted: list[str] = []

        def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
            """Exports the user's data."""
            self.submitted.append(job.id)
            return {"message": f"Exporting {export_type}."}

        self.tool = oa.long_running_tool(self.app, export_data, deadline=deadline)
        self.model = oa.ScriptedModel(RULES)
        self.agent = Agent(name="exporter", model=self.model, tools=[self.tool])
        self.runner = oa.OpenAIAgentsRunner(self.agent, path=folder / "conversations.db")

    async def turn(self, text: str, session_id: str = "s") -> list[longcall.AgentEvent]:
        return await self.app.run_turn_async(
            self.runner, user_id="u", session_id=session_id, text=text
        )

    async def turn_quietly(self, text: str) -> None:
        await self.turn(text)

    async def items(self, session_id: str = "s") -> list[dict[str, Any]]:
        session = self.runner.session("u", session_id)
        try:
            return [dict(i) for i in await session.get_items()]
        finally:
            session.close()  # a SQLiteSession keeps a connection per thread until closed

    async def outputs(self, session_id: str = "s") -> list[tuple[str, dict[str, Any]]]:
        return [
            (i["call_id"], json.loads(i["output"]))
            for i in await self.items(session_id)
            if i.get("type") == "function_call_output"
        ]

    async def replies(self, session_id: str = "s") -> list[str]:
        return [
            i["content"][0]["text"]
            for i in await self.items(session_id)
            if i.get("role") == "assistant"
        ]


@pytest.fixture
def setup(db_url: str, tmp_path: Path) -> Iterator[Setup]:
    made = Setup(db_url, tmp_path)
    yield made
    made.app.close()


def run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(scenario)


def test_importing_longcall_never_imports_the_sdk() -> None:
    """`import longcall` leaves the OpenAI Agents SDK unloaded: the adapter is an extra."""
    code = "import sys, longcall, longcall.testing; print('agents' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_call_pauses_the_run_and_its_result_resumes_it_once(setup: Setup) -> None:
    """The call records the job with the whole join; the deliverer resumes the paused run with
    the result under the original call id and tool name, once."""
    run(a_call_pauses_the_run_and_its_result_resumes_it_once(setup))


async def a_call_pauses_the_run_and_its_result_resumes_it_once(setup: Setup) -> None:
    assert isinstance(setup.runner, longcall.AgentRunner)
    assert isinstance(setup.runner, TranscriptSource)
    events = await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    assert (job.app_name, job.user_id, job.session_id) == ("exporter", "u", "s")
    assert setup.submitted == [job.job_id]
    [paused] = [e for e in events if e.long_running_ids]
    assert paused.long_running_ids == {job.call_id}
    assert paused.function_calls[0].name == "export_data"
    assert paused.function_responses[0].response["status"] == "pending"
    assert paused.function_responses[0].response["jobId"] == job.job_id
    assert job.invocation_id == paused.invocation_id
    assert await setup.outputs() == []  # the call is open: no output yet

    await setup.app.complete_async(job.job_id, {"url": "https://example.com/x.csv"})
    seen: list[longcall.AgentEvent] = []
    deliverer = setup.app.deliverer(setup.runner, on_event=lambda _, e: seen.append(e))
    assert await deliverer.run_once() == 1
    # The resume reports what it added: the call's output, then the model's answer.
    assert [(e.function_responses[0].id if e.function_responses else e.text) for e in seen] == [
        job.call_id,
        "export_data has finished: url https://example.com/x.csv.",
    ]
    assert seen[0].function_responses[0].name == "export_data"
    assert {e.invocation_id for e in seen} == {job.invocation_id}
    [(call_id, output)] = await setup.outputs()
    assert call_id == job.call_id
    assert output["status"] == "succeeded"
    assert output["result"] == {"url": "https://example.com/x.csv"}
    assert (await setup.replies())[-1] == (
        "export_data has finished: url https://example.com/x.csv."
    )
    assert (await setup.app.get_job_async(job.job_id)).delivered_at is not None
    assert await setup.runner.has_function_response(user_id="u", session_id="s", call_id=call_id)
    assert await setup.runner.paused.open_calls_async(KEY, [call_id]) == {}


def test_parallel_calls_resume_the_run_as_each_result_comes(setup: Setup) -> None:
    """Two calls in one turn: each result resumes the paused run as it comes; the model
    answers once, when both outputs are in, each under its own call id."""
    run(parallel_calls_resume_the_run_as_each_result_comes(setup))


async def parallel_calls_resume_the_run_as_each_result_comes(setup: Setup) -> None:
    events = await setup.turn("Export everything")
    jobs = sorted(await setup.app.list_jobs_async(), key=lambda j: j.args["export_type"])
    assert [j.args["export_type"] for j in jobs] == ["csv", "pdf"]
    assert len({j.call_id for j in jobs}) == 2
    assert {j.invocation_id for j in jobs} == {events[-1].invocation_id}
    deliverer = setup.app.deliverer(setup.runner)
    await setup.app.complete_async(jobs[0].job_id, "csv ready")
    assert await deliverer.run_once() == 1
    assert [c for c, _ in await setup.outputs()] == [jobs[0].call_id]
    assert await setup.replies() == []  # the model waits for the other call
    assert len(setup.submitted) == 2  # pausing again submits nothing twice
    await setup.app.complete_async(jobs[1].job_id, "pdf ready")
    assert await deliverer.run_once() == 1
    outputs = dict(await setup.outputs())
    assert outputs[jobs[0].call_id]["result"] == "csv ready"
    assert outputs[jobs[1].call_id]["result"] == "pdf ready"
    assert await setup.replies() == [
        "export_data has finished: csv ready. export_data has finished: pdf ready."
    ]
    assert len(setup.model.inputs) == 2  # the call turn and one answer


def test_parallel_results_ready_together_resume_the_run_once(setup: Setup) -> None:
    """Both results in before the deliverer runs: one message, one resume, one answer."""
    run(parallel_results_ready_together_resume_the_run_once(setup))


async def parallel_results_ready_together_resume_the_run_once(setup: Setup) -> None:
    await setup.turn("Export everything")
    for job in await setup.app.list_jobs_async():
        await setup.app.complete_async(job.job_id, f"{job.args['export_type']} ready")
    assert await setup.app.deliverer(setup.runner).run_once() == 2
    assert len(await setup.outputs()) == 2
    assert len(await setup.replies()) == 1


def test_a_duplicate_completion_is_delivered_once(setup: Setup) -> None:
    """A second completion changes nothing; redelivering the job stores nothing twice."""
    run(a_duplicate_completion_is_delivered_once(setup))


async def a_duplicate_completion_is_delivered_once(setup: Setup) -> None:
    await setup.turn("Export my data to JSON")
    [job] = await setup.app.list_jobs_async()
    assert (await setup.app.complete_async(job.job_id, "first")).changed
    assert not (await setup.app.complete_async(job.job_id, "second")).changed
    deliverer = setup.app.deliverer(setup.runner)
    assert await deliverer.run_once() == 1
    assert await deliverer.run_once() == 0
    assert await setup.runner.has_function_response(
        user_id="u", session_id="s", call_id=str(job.call_id)
    )
    # Even handed the same response again, the runner stores nothing more.
    message = Message(
        function_responses=(
            FunctionResponse(
                str(job.call_id), "export_data", {"status": "succeeded", "result": "again"}
            ),
        )
    )
    assert [e async for e in setup.runner.run(user_id="u", session_id="s", message=message)] == []
    [(_, output)] = await setup.outputs()
    assert output["result"] == "first"
    assert len(await setup.replies()) == 1


def test_a_deadline_expires_the_job_and_resumes_the_run(db_url: str, tmp_path: Path) -> None:
    """A result that never comes: the sweeper expires the job at its deadline, and the
    model reads the expired answer under the original call id."""
    clock = FakeClock()
    setup = Setup(db_url, tmp_path, clock=clock, deadline="10m")
    try:
        run(a_deadline_expires_the_job_and_resumes_the_run(setup, clock))
    finally:
        setup.app.close()


async def a_deadline_expires_the_job_and_resumes_the_run(setup: Setup, clock: FakeClock) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    clock.advance(601)
    assert [j.job_id for j in await setup.app.sweeper().run_once()] == [job.job_id]
    assert await setup.app.deliverer(setup.runner).run_once() == 1
    [(call_id, output)] = await setup.outputs()
    assert call_id == job.call_id and output["status"] == "expired"
    assert "did not finish in time" in (await setup.replies())[-1]


def test_a_user_turn_while_a_call_is_open_keeps_the_paused_run(setup: Setup) -> None:
    """The user talks while the call is open: the turn runs (without the open call in the
    model's input), and the result still resumes the paused run under its call id."""
    run(a_user_turn_while_a_call_is_open_keeps_the_paused_run(setup))


async def a_user_turn_while_a_call_is_open_keeps_the_paused_run(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    events = await setup.turn("hello")
    assert [e.text for e in events if e.text and e.author != "user"] == [
        "Hello! Your export is still on its way."
    ]
    sent = setup.model.inputs[-1]
    assert all(i.get("type") != "function_call" for i in sent)
    await setup.app.complete_async(job.job_id, "done")
    assert await setup.app.deliverer(setup.runner).run_once() == 1
    [(call_id, output)] = await setup.outputs()
    assert call_id == job.call_id and output["result"] == "done"
    assert (await setup.replies())[-1] == "export_data has finished: done."
    # Later turns read the whole conversation, each call right before its output (the
    # order Chat Completions models need); the session keeps what happened when.
    await setup.turn("hello again")
    kinds = [i.get("type") or i.get("role") for i in setup.model.inputs[-1]]
    assert kinds == [
        "user",
        "user",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "user",
    ]
    stored = [i.get("type") or i.get("role") for i in await setup.items()]
    assert stored == [
        "user",
        "function_call",
        "user",
        "message",
        "function_call_output",
        "message",
        "user",
        "message",
    ]


def test_an_unknown_call_is_refused_before_anything_is_stored(setup: Setup) -> None:
    """A response to a call no paused run waits on raises UnknownCallError and stores
    nothing; the deliverer marks such a job orphaned."""
    run(an_unknown_call_is_refused_before_anything_is_stored(setup))


async def an_unknown_call_is_refused_before_anything_is_stored(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    before = await setup.items()
    message = Message(
        function_responses=(FunctionResponse("call_nope", "export_data", {"status": "succeeded"}),)
    )
    with pytest.raises(UnknownCallError, match="call_nope"):
        [e async for e in setup.runner.run(user_id="u", session_id="s", message=message)]
    assert await setup.items() == before
    job, _ = await setup.app.create_job_async(
        "export_data", ids=CallIds("exporter", "u", "s", "call_nope", "run-gone")
    )
    await setup.app.complete_async(job.job_id, "x")
    deliverer = setup.app.deliverer(setup.runner)
    assert await deliverer.run_once() == 1
    assert deliverer.stats["orphaned"] == 1
    assert await setup.items() == before


def test_a_lost_fence_writes_nothing(setup: Setup) -> None:
    """A delivery whose holder lost the session's lease raises FenceLost and writes nothing:
    the run stays paused for the holder that has the session now."""
    run(a_lost_fence_writes_nothing(setup))


async def a_lost_fence_writes_nothing(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    before = await setup.items()
    checks: list[bool] = []

    def held() -> bool:
        checks.append(True)
        return len(checks) == 1  # held at the first check, lost right after

    fence = Fence(KEY, "stalled", 1, held)
    response = FunctionResponse(
        str(job.call_id), "export_data", {"status": "succeeded", "result": 1}
    )
    message = Message(function_responses=(response,), fence=fence)
    with pytest.raises(FenceLost):
        [e async for e in setup.runner.run(user_id="u", session_id="s", message=message)]
    assert await setup.items() == before
    assert await setup.runner.paused.open_calls_async(KEY, [str(job.call_id)])
    # The holder that has the session now delivers it.
    await setup.app.complete_async(job.job_id, "ok")
    assert await setup.app.deliverer(setup.runner).run_once() == 1
    [(_, output)] = await setup.outputs()
    assert output["result"] == "ok"


def test_a_restarted_app_resumes_a_paused_run(db_url: str, tmp_path: Path) -> None:
    """A new App, agent and runner over the same files resume the run paused before."""
    first = Setup(db_url, tmp_path)
    try:
        run(first.turn_quietly("Export my data to CSV"))
    finally:
        first.app.close()
    second = Setup(db_url, tmp_path)
    try:
        run(a_restarted_app_resumes_a_paused_run(second))
    finally:
        second.app.close()


async def a_restarted_app_resumes_a_paused_run(setup: Setup) -> None:
    [job] = await setup.app.list_jobs_async()
    await setup.app.complete_async(job.job_id, "after the restart")
    assert await setup.app.deliverer(setup.runner).run_once() == 1
    [(call_id, output)] = await setup.outputs()
    assert call_id == job.call_id and output["result"] == "after the restart"
    assert (await setup.replies())[-1] == "export_data has finished: after the restart."


def test_the_worker_delivers_a_result_end_to_end(setup: Setup) -> None:
    """``app.worker(runner)`` delivers a completion into the paused run on its own."""
    run(the_worker_delivers_a_result_end_to_end(setup))


async def the_worker_delivers_a_result_end_to_end(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    worker = setup.app.worker(setup.runner, poll_interval=0.05)
    task = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await setup.app.complete_async(job.job_id, "by the worker")
        for _ in range(200):
            if await setup.replies():
                break
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await task
    assert await setup.replies() == ["export_data has finished: by the worker."]


def test_bad_arguments_answer_the_call_at_once(setup: Setup) -> None:
    """A call the tool refuses (bad arguments) starts no job and is answered with the error
    in the same turn, so the run does not stay paused."""
    run(bad_arguments_answer_the_call_at_once(setup))


async def bad_arguments_answer_the_call_at_once(setup: Setup) -> None:
    setup.model.rules = (longcall.Rule("export", calls=[("export_data", {"kind": "csv"})]),)
    events = await setup.turn("export please")
    assert await setup.app.list_jobs_async() == []
    [(_, output)] = await setup.outputs()
    assert output["status"] == "error"
    assert (await setup.replies())[-1].startswith("I couldn't run export_data")
    assert any(e.function_responses for e in events)


def test_another_tool_needing_approval_is_refused(tmp_path: Path) -> None:
    """The runner cannot approve other tools, so an agent with one is a ConfigError."""

    @function_tool(needs_approval=True)
    def delete_account(reason: str) -> str:
        """Deletes the account."""
        return "deleted"

    agent = Agent(name="a", model=oa.ScriptedModel(), tools=[delete_account])
    with pytest.raises(ConfigError, match="delete_account"):
        oa.OpenAIAgentsRunner(agent, path=tmp_path / "c.db")


def test_progress_waits_for_the_result(setup: Setup) -> None:
    """Progress a tool reports for the model has no place in a paused call: the run stays
    paused, and the result resumes it as usual."""
    run(progress_waits_for_the_result(setup))


async def progress_waits_for_the_result(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    before = await setup.items()
    await setup.app.progress_async(job.job_id, {"percent": 50}, notify_model=True)
    deliverer = setup.app.deliverer(setup.runner)
    assert await deliverer.run_once() == 1
    assert deliverer.stats["progress_delivered"] == 1
    assert await setup.items() == before
    await setup.app.complete_async(job.job_id, "done")
    assert await deliverer.run_once() == 1
    assert (await setup.replies())[-1] == "export_data has finished: done."


def test_calls_move_next_to_outputs_only_across_other_turns() -> None:
    """A call and its output kept apart by a user's turn are brought together (parallel calls
    each before its own output); adjacent ones and open calls stay where they are."""
    from longcall.openai_agents.history import calls_beside_outputs

    def call(i: str) -> dict[str, str]:
        return {"type": "function_call", "call_id": i}

    def out(i: str) -> dict[str, str]:
        return {"type": "function_call_output", "call_id": i}

    user = {"role": "user", "content": "hi"}
    assert calls_beside_outputs([user, call("a"), out("a"), user]) == [
        user,
        call("a"),
        out("a"),
        user,
    ]
    assert calls_beside_outputs([call("a"), call("b"), user, out("a"), out("b")]) == [
        user,
        call("a"),
        out("a"),
        call("b"),
        out("b"),
    ]
    assert calls_beside_outputs([call("a"), user]) == [call("a"), user]


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "openai-agents.md"


def test_the_guide_example_runs_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's code, run as written (with the offline model), resumes a completed export."""
    match = re.search(
        r"<!-- docs-openai-agents:.*?-->\s*```python\n(.*?)```", GUIDE.read_text(), re.S
    )
    assert match, "the OpenAI Agents guide lost its example"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(GUIDE), "exec"), namespace)
    jobs, agent, runner = (namespace[k] for k in ("jobs", "agent", "runner"))
    assert isinstance(namespace["worker"], longcall.Worker)
    agent.model = oa.ScriptedModel(RULES)  # no network here: the offline model stands in
    try:
        run(the_guide_example_resumes(jobs, runner))
    finally:
        jobs.close()


async def the_guide_example_resumes(jobs: longcall.App, runner: Any) -> None:
    await jobs.run_turn_async(runner, user_id="ana", session_id="s1", text="Export my data to CSV")
    [job] = await jobs.list_jobs_async()
    assert job.job_id == longcall.job_id_for("export:s1:csv", "ana")
    await jobs.complete_async(job.job_id, {"url": "https://example.com/x.csv"})
    assert await jobs.deliverer(runner).run_once() == 1
    events = await runner.transcript(user_id="ana", session_id="s1")
    assert events[-1].text == "export_data has finished: url https://example.com/x.csv."


def test_a_second_call_while_one_is_open_pauses_a_run_of_its_own(setup: Setup) -> None:
    """A user turn while a call is open calls the tool again: two paused runs in one session,
    each resumed by its own job, in either order."""
    run(a_second_call_while_one_is_open_pauses_a_run_of_its_own(setup))


async def a_second_call_while_one_is_open_pauses_a_run_of_its_own(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    await setup.turn("Export my data to JSON")
    first, second = sorted(await setup.app.list_jobs_async(), key=lambda j: j.created_at)
    assert first.invocation_id != second.invocation_id
    deliverer = setup.app.deliverer(setup.runner)
    await setup.app.complete_async(second.job_id, "json ready")
    assert await deliverer.run_once() == 1
    await setup.app.complete_async(first.job_id, "csv ready")
    assert await deliverer.run_once() == 1
    assert dict(await setup.outputs()) == {
        first.call_id: {"status": "succeeded", "jobId": first.job_id, "result": "csv ready"},
        second.call_id: {"status": "succeeded", "jobId": second.job_id, "result": "json ready"},
    }
    assert await setup.replies() == [
        "export_data has finished: json ready.",
        "export_data has finished: csv ready.",
    ]
    transcript = await setup.runner.transcript(user_id="u", session_id="s")
    marked = set().union(*(e.long_running_ids for e in transcript))
    assert marked == {first.call_id, second.call_id}


def test_the_paused_runs_need_a_file(tmp_path: Path) -> None:
    """An in-memory path would lose the paused runs: refused."""
    agent = Agent(name="a", model=oa.ScriptedModel())
    with pytest.raises(ValueError, match="SQLite file"):
        oa.OpenAIAgentsRunner(agent, path=":memory:")


def test_a_model_failure_on_resume_is_retried_without_a_second_output(setup: Setup) -> None:
    """The SDK stores the output before the model turn: when that turn fails, the delivery is
    retried, resumes the paused run again, and the session keeps one output and one answer."""
    run(a_model_failure_on_resume_is_retried_without_a_second_output(setup))


async def a_model_failure_on_resume_is_retried_without_a_second_output(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    await setup.app.complete_async(job.job_id, "done")
    answer = setup.model.answer

    def down(items: list[dict[str, Any]]) -> list[Any]:
        raise RuntimeError("the model is down")

    setup.model.answer = down  # type: ignore[method-assign]
    deliverer = setup.app.deliverer(setup.runner, retry_base=0.01)
    assert await deliverer.run_once() == 1
    assert deliverer.stats["delivery_retried"] == 1
    assert not await setup.runner.has_function_response(
        user_id="u", session_id="s", call_id=str(job.call_id)
    )
    setup.model.answer = answer  # type: ignore[method-assign]
    for _ in range(100):
        if await deliverer.run_once():
            break
        await asyncio.sleep(0.02)
    assert deliverer.stats["delivered"] == 1
    assert [c for c, _ in await setup.outputs()] == [job.call_id]
    assert await setup.replies() == ["export_data has finished: done."]


def test_sessions_resume_concurrently_each_with_its_own_result(setup: Setup) -> None:
    """One deliverer pass resumes several sessions at once: each run reads its own job's
    result (the answers never cross between concurrent resumes)."""
    run(sessions_resume_concurrently_each_with_its_own_result(setup))


async def sessions_resume_concurrently_each_with_its_own_result(setup: Setup) -> None:
    sessions = [f"s{n}" for n in range(6)]
    for session_id in sessions:
        await setup.turn("Export my data to CSV", session_id=session_id)
    for job in await setup.app.list_jobs_async():
        await setup.app.complete_async(job.job_id, f"for {job.session_id}")
    assert await setup.app.deliverer(setup.runner).run_once() == len(sessions)
    for session_id in sessions:
        [(_, output)] = await setup.outputs(session_id)
        assert output["result"] == f"for {session_id}"
        assert await setup.replies(session_id) == [f"export_data has finished: for {session_id}."]


def test_a_delivery_waits_for_the_users_turn(setup: Setup) -> None:
    """While a user's turn holds the session's lease, the deliverer leaves the session alone;
    once the turn ends, the result resumes the paused run."""
    run(a_delivery_waits_for_the_users_turn(setup))


async def a_delivery_waits_for_the_users_turn(setup: Setup) -> None:
    await setup.turn("Export my data to CSV")
    [job] = await setup.app.list_jobs_async()
    await setup.app.complete_async(job.job_id, "done")
    deliverer = setup.app.deliverer(setup.runner)
    async with setup.app.session_turn("s", app_name="exporter", user_id="u"):
        assert await deliverer.run_once() == 0
        assert await setup.outputs() == []
    assert await deliverer.run_once() == 1
    assert await setup.replies() == ["export_data has finished: done."]
