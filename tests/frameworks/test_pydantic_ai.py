"""The pydantic-ai adapter with the real pydantic-ai and its offline FunctionModel, on SQLite
and PostgreSQL: deferred calls recorded as jobs, resumed under their original ids."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import longcall
from longcall.agents import Fence, FunctionResponse, Message, TranscriptSource
from longcall.core.clock import FakeClock
from longcall.core.jobs import SessionKey
from longcall.jobs.delivery import response_of

pai = pytest.importorskip("longcall.pydantic_ai", reason="pydantic-ai is not installed")
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.tools import DeferredToolRequests  # noqa: E402

USER, SESSION = "u1", "s1"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls `export` once per format a request names; otherwise says what it was given."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    prompts = [str(p.content) for p in last.parts if isinstance(p, UserPromptPart)]
    if not returns and prompts and prompts[0].startswith("export"):
        formats = [f for f in ("csv", "json") if f in prompts[0]]
        calls = [ToolCallPart("export", {"kind": f}) for f in formats]
        if "time" in prompts[0]:
            calls.append(ToolCallPart("clock", {}))  # an ordinary tool beside the deferred one
        return ModelResponse(parts=calls)
    said = [f"{r.tool_name} {r.tool_call_id}: {status_of(r.content)}" for r in returns]
    said += [f"heard: {p}" for p in prompts]
    return ModelResponse(parts=[TextPart("; ".join(said))])


def status_of(content: Any) -> Any:
    return content.get("status") if isinstance(content, dict) else content


def clock() -> str:
    """The time."""
    return "noon"


def build(app: longcall.App, model: Any = scripted, **options: Any) -> Any:
    def export(kind: str, job: longcall.JobHandle) -> str:
        """Exports the user's data."""
        return f"Exporting {kind}."

    tool = pai.long_running_tool(app, export, key="export:{session_id}:{kind}", **options)
    agent = Agent(
        FunctionModel(model),
        name="exporter",
        tools=[tool, clock],
        output_type=[str, DeferredToolRequests],
    )
    return pai.PydanticAiRunner(agent, app, app_name="exports")


@pytest.fixture
def app(db_url: str) -> Iterator[longcall.App]:
    with longcall.App(db_url) as app:
        yield app


def turn(app: longcall.App, runner: Any, text: str) -> list[Any]:
    return asyncio.run(app.run_turn_async(runner, user_id=USER, session_id=SESSION, text=text))


def history(runner: Any) -> list[ModelMessage]:
    return asyncio.run(runner.history(user_id=USER, session_id=SESSION))


def deliver(app: longcall.App, runner: Any) -> int:
    return asyncio.run(app.deliverer(runner).run_once())


def job_of(app: longcall.App, kind: str) -> longcall.Job:
    [job] = [j for j in app.list_jobs() if j.args == {"kind": kind}]
    return job


def returns_in(message: ModelMessage) -> dict[str, ToolReturnPart]:
    return {p.tool_call_id: p for p in message.parts if isinstance(p, ToolReturnPart)}


def answered(runner: Any, call_id: str | None) -> bool:
    assert call_id is not None
    return asyncio.run(
        runner.has_function_response(user_id=USER, session_id=SESSION, call_id=call_id)
    )


def test_importing_longcall_never_imports_pydantic_ai() -> None:
    """`import longcall` leaves pydantic-ai unloaded: the adapter is an optional extra."""
    code = "import sys, longcall, longcall.testing; print('pydantic_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_result_resumes_the_call_under_its_id_through_the_worker(app: longcall.App) -> None:
    """The call records the whole join; the worker delivers the result as that call's return."""
    runner = build(app)
    events = turn(app, runner, "export csv")
    job = job_of(app, "csv")
    call = events[-1].function_calls[0]
    assert (job.app_name, job.user_id, job.session_id) == ("exports", USER, SESSION)
    assert job.call_id == call.id and events[-1].long_running_ids == {call.id}
    assert job.invocation_id == events[-1].invocation_id != ""
    assert not answered(runner, job.call_id)
    app.complete(job.job_id, {"url": "https://example.com/x.csv"})
    worker = app.worker(runner, poll_interval="0.1s")

    async def run_until_delivered() -> None:
        running = asyncio.create_task(worker.run(handle_signals=False))
        for _ in range(200):
            if (await app.get_job_async(job.job_id)).delivered_at is not None:
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await asyncio.wait_for(running, 30)

    asyncio.run(run_until_delivered())
    request, reply = history(runner)[-2:]
    part = returns_in(request)[call.id]
    assert part.tool_name == "export"
    assert part.content == {
        "status": "succeeded",
        "jobId": job.job_id,
        "result": {"url": "https://example.com/x.csv"},
    }
    assert isinstance(reply, ModelResponse) and reply.text == f"export {call.id}: succeeded"
    assert answered(runner, job.call_id)


def test_parallel_calls_answered_one_by_one(app: longcall.App) -> None:
    """The first result answers its call and notes the other pending; the later one follows."""
    runner = build(app)
    turn(app, runner, "export csv and json")
    csv, json_ = job_of(app, "csv"), job_of(app, "json")
    assert csv.invocation_id == json_.invocation_id
    app.complete(csv.job_id, "csv done")
    assert deliver(app, runner) == 1
    request, reply = history(runner)[-2:]
    parts = returns_in(request)
    assert parts[csv.call_id].content["status"] == "succeeded"  # type: ignore[index]
    assert parts[json_.call_id].content["status"] == "pending"  # type: ignore[index]
    assert reply.text == f"export {csv.call_id}: succeeded; export {json_.call_id}: pending"  # type: ignore[union-attr]
    assert answered(runner, csv.call_id) and not answered(runner, json_.call_id)
    app.complete(json_.job_id, "json done")
    assert deliver(app, runner) == 1
    request, reply = history(runner)[-2:]
    [note] = [p for p in request.parts if isinstance(p, UserPromptPart)]
    assert f"call {json_.call_id} of tool export" in str(note.content)
    assert "json done" in str(note.content) and not returns_in(request)
    assert answered(runner, json_.call_id)


def test_parallel_results_ready_together_go_in_one_request(app: longcall.App) -> None:
    """Both results of one turn, ready together, answer both calls in one model request."""
    runner = build(app)
    turn(app, runner, "export csv and json")
    before = len(history(runner))
    app.complete(job_of(app, "csv").job_id, 1)
    app.complete(job_of(app, "json").job_id, 2)
    assert deliver(app, runner) == 2
    after = history(runner)
    assert len(after) == before + 2
    assert {p.content["status"] for p in returns_in(after[-2]).values()} == {"succeeded"}  # type: ignore[index]


def test_a_duplicate_completion_is_delivered_once(app: longcall.App) -> None:
    """A result already in the session (a delivery that crashed before its bookkeeping, a
    repeated completion) is not delivered again."""
    runner = build(app)
    turn(app, runner, "export csv")
    job = job_of(app, "csv")
    app.complete(job.job_id, "first")
    done = app.get_job(job.job_id)
    message = Message(function_responses=(response_of(done),))
    asyncio.run(_collect(runner.run(user_id=USER, session_id=SESSION, message=message)))
    length = len(history(runner))
    deliverer = app.deliverer(runner)
    assert asyncio.run(deliverer.run_once()) == 1
    assert deliverer.stats["already_in_session"] == 1
    assert app.get_job(job.job_id).delivered_at is not None
    assert not app.complete(job.job_id, "second").changed
    again = asyncio.run(_collect(runner.run(user_id=USER, session_id=SESSION, message=message)))
    assert again == [] and len(history(runner)) == length


def test_an_expired_deadline_answers_the_call(db_url: str) -> None:
    """A result that never comes: the sweeper expires the job and the call hears so."""
    clock = FakeClock()
    with longcall.App(db_url, clock=clock) as app:
        runner = build(app, deadline="10m")
        turn(app, runner, "export csv")
        clock.advance(11 * 60)
        [expired] = asyncio.run(app.sweeper().run_once())
        assert deliver(app, runner) == 1
        part = returns_in(history(runner)[-2])[expired.call_id or ""]
        assert part.content["status"] == "expired"  # type: ignore[index]
        assert answered(runner, expired.call_id)


def test_a_user_turn_while_a_call_is_open_notes_it_pending(app: longcall.App) -> None:
    """The user may talk while a call runs: the call is noted pending, its result follows."""
    runner = build(app)
    turn(app, runner, "export csv")
    job = job_of(app, "csv")
    events = turn(app, runner, "how is it going?")
    assert events[-1].text == f"export {job.call_id}: pending; heard: how is it going?"
    assert not answered(runner, job.call_id)
    app.complete(job.job_id, "done")
    assert deliver(app, runner) == 1
    assert f"call {job.call_id} of tool export" in (history(runner)[-1].text or "")  # type: ignore[union-attr]
    assert answered(runner, job.call_id)


def test_an_unknown_call_is_refused_before_anything_is_stored(app: longcall.App) -> None:
    """A response to a call the session never made raises UnknownCallError and writes nothing."""
    runner = build(app)
    turn(app, runner, "export csv")
    length = len(history(runner))
    response = FunctionResponse("no-such-call", "export", {"status": "succeeded"})
    message = Message(function_responses=(response,))
    with pytest.raises(longcall.UnknownCallError):
        asyncio.run(_collect(runner.run(user_id=USER, session_id=SESSION, message=message)))
    assert len(history(runner)) == length


def test_a_lost_fence_writes_nothing(app: longcall.App) -> None:
    """A delivery whose fence is not the session's lease raises FenceLost; nothing is written."""
    runner = build(app)
    turn(app, runner, "export csv")
    job = job_of(app, "csv")
    length = len(history(runner))
    session = SessionKey("exports", USER, SESSION)
    fence = Fence(session, "stalled-holder", 7, held=lambda: False)
    response = FunctionResponse(job.call_id or "", "export", {"status": "succeeded"})
    message = Message(function_responses=(response,), fence=fence)
    with pytest.raises(longcall.FenceLost):
        asyncio.run(_collect(runner.run(user_id=USER, session_id=SESSION, message=message)))
    assert len(history(runner)) == length and not answered(runner, job.call_id)
    app.complete(job.job_id, "done")
    assert deliver(app, runner) == 1 and answered(runner, job.call_id)


def test_a_new_app_and_runner_resume_after_a_restart(db_url: str) -> None:
    """The history and the open call live in the database: another process resumes them."""
    with longcall.App(db_url) as first:
        turn(first, build(first), "export csv")
        job = job_of(first, "csv")
    with longcall.App(db_url) as second:
        runner = build(second)
        second.complete(job.job_id, "done")
        assert deliver(second, runner) == 1
        assert returns_in(history(runner)[-2])[job.call_id or ""].tool_call_id == job.call_id
        assert answered(runner, job.call_id)


def test_the_transcript_shows_calls_and_returns(app: longcall.App) -> None:
    """The runner is a TranscriptSource: the session's messages in longcall's terms."""
    runner = build(app)
    assert isinstance(runner, TranscriptSource)
    turn(app, runner, "export csv")
    job = job_of(app, "csv")
    app.complete(job.job_id, "done")
    deliver(app, runner)
    events = asyncio.run(runner.transcript(user_id=USER, session_id=SESSION))
    assert [e.author for e in events] == ["user", "exporter", "user", "exporter"]
    assert events[1].long_running_ids == {job.call_id}
    assert events[2].function_responses[0].id == job.call_id
    assert asyncio.run(runner.transcript(user_id="someone else", session_id=SESSION)) == []


def test_the_tool_refuses_a_run_outside_the_runner(app: longcall.App) -> None:
    """Called by a bare agent.run, the tool says it needs the runner (no orphan job)."""
    runner = build(app)
    with pytest.raises(Exception, match="outside a PydanticAiRunner"):
        asyncio.run(runner.agent.run("export csv"))
    assert app.list_jobs() == []


def test_an_agent_that_cannot_defer_is_refused(app: longcall.App) -> None:
    """Without DeferredToolRequests in output_type, the runner refuses the agent up front."""
    with pytest.raises(ValueError, match="DeferredToolRequests"):
        pai.PydanticAiRunner(Agent(FunctionModel(scripted)), app)


async def _collect(events: Any) -> list[Any]:
    return [e async for e in events]


def test_progress_answers_the_call_for_now_and_the_result_follows(app: longcall.App) -> None:
    """Progress the model should hear notes the call running; the closing result follows."""
    runner = build(app)
    turn(app, runner, "export csv")
    job = job_of(app, "csv")
    app.progress(job.job_id, {"done": "50%"}, notify_model=True)
    assert deliver(app, runner) == 1
    part = returns_in(history(runner)[-2])[job.call_id or ""]
    assert part.content == {"status": "running", "jobId": job.job_id, "progress": {"done": "50%"}}
    assert not answered(runner, job.call_id)
    app.complete(job.job_id, "done")
    assert deliver(app, runner) == 1
    assert answered(runner, job.call_id)


def test_an_ordinary_tool_beside_a_deferred_one_keeps_its_return(app: longcall.App) -> None:
    """A plain tool called in the same response runs at once; the resume answers only the
    deferred call and the model sees both returns."""
    runner = build(app)
    turn(app, runner, "export csv and tell the time")
    job = job_of(app, "csv")
    app.complete(job.job_id, "done")
    assert deliver(app, runner) == 1
    reply = history(runner)[-1]
    assert isinstance(reply, ModelResponse)
    assert f"export {job.call_id}: succeeded" in reply.text  # type: ignore[operator]
    [clock_return] = [
        p
        for m in history(runner)
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "clock"
    ]
    assert clock_return.content == "noon"


def test_the_tool_declares_only_the_model_s_parameters(app: longcall.App) -> None:
    """The job handle is hidden from the model; the description says not to call again."""

    @pai.long_running_tool(app, name="report")
    def make_report(topic: str, pages: int, job: longcall.JobHandle) -> None:
        """Writes a report."""

    schema = make_report.tool_def.parameters_json_schema
    assert set(schema["properties"]) == {"topic", "pages"}
    assert make_report.name == "report" and "Writes a report." in (make_report.description or "")


def test_both_dialects_define_the_same_queries() -> None:
    """The adapter's SQL files name the same queries for SQLite and PostgreSQL."""
    from longcall.pydantic_ai._sessions import _queries

    sqlite, postgres = _queries("sqlite"), _queries("postgres")
    assert sqlite.keys() == postgres.keys() and "pai_insert_message" in sqlite


def test_a_delivery_overtaken_mid_run_writes_nothing(db_url: str) -> None:
    """The deliverer's lease runs out while the model thinks and a user turn takes the session:
    the delivery's append finds its fence lost, stores nothing, and a later pass delivers."""
    clock = FakeClock()
    stall = {"on": False}
    with longcall.App(db_url, clock=clock) as app:

        async def overtaken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if stall.pop("on", False):
                clock.advance(600)  # far past the deliverer's lease
                key = {"app_name": "exports", "user_id": USER}
                async with app.session_turn(SESSION, **key):
                    pass  # another holder took (and gave back) the session meanwhile
            return scripted(messages, info)

        runner = build(app, overtaken)
        turn(app, runner, "export csv")
        job = job_of(app, "csv")
        app.complete(job.job_id, "done")
        length = len(history(runner))
        stall["on"] = True
        deliverer = app.deliverer(runner)
        asyncio.run(deliverer.run_once())
        assert deliverer.stats["fence_lost"] == 1, (deliverer.stats, stall)
        assert len(history(runner)) == length and not answered(runner, job.call_id)
        assert app.get_job(job.job_id).delivered_at is None
        again = app.deliverer(runner)
        assert asyncio.run(again.run_once()) == 1 and answered(runner, job.call_id)
