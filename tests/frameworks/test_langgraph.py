"""longcall.langgraph on the real langgraph: tools that wait in interrupts, resumed once.

Every test runs a real compiled graph (a model node and a ``ToolNode``) on the scripted chat
model, with LangGraph's SQLite checkpointer in tmp_path, over longcall's SQLite and PostgreSQL
job stores.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import longcall

pytest.importorskip("longcall.langgraph", reason="langgraph is not installed (extra 'langgraph')")
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from longcall.agents import AgentRunner, Fence, FunctionResponse, Message, TranscriptSource
from longcall.core.jobs import SessionKey, final_response
from longcall.errors import AgentError, FenceLost, UnknownCallError
from longcall.langgraph import (
    CallsPending,
    LangGraphRunner,
    ScriptedChatModel,
    long_running_tool,
    send_each_tool_call,
)

APP, USER, THREAD = "exports", "ana", "thread-1"
RULES = [
    longcall.Rule(
        r"export (\w+) and (\w+)",
        calls=[
            ("export_data", lambda m: {"export_type": m[1]}),
            ("export_data", lambda m: {"export_type": m[2]}),
        ],
    ),
    longcall.Rule(r"export (\w+)", calls=[("export_data", lambda m: {"export_type": m[1]})]),
    longcall.Rule(r"hello", reply="Hello!"),
]


@dataclass
class Agent:
    """One process's view: the job app, the tool, the graph and its runner."""

    app: longcall.App
    runner: LangGraphRunner
    saver: BaseCheckpointSaver[Any]
    submitted: list[str] = field(default_factory=list)

    async def turn(self, text: str, session: str = THREAD) -> list[Any]:
        return await self.app.run_turn_async(
            self.runner, user_id=USER, session_id=session, text=text
        )

    async def jobs(self, session: str = THREAD) -> list[longcall.Job]:
        jobs = await self.app.list_jobs_async(session_id=session)
        return sorted(jobs, key=lambda j: j.args["export_type"])

    async def messages(self, session: str = THREAD) -> list[Any]:
        state = await self.runner.graph.aget_state({"configurable": {"thread_id": session}})
        return list(state.values.get("messages", []))

    async def checkpoints(self, session: str = THREAD) -> tuple[int, int]:
        """How many checkpoints the thread has, and pending writes its latest one."""
        config: Any = {"configurable": {"thread_id": session}}
        saved = [c async for c in self.runner.checkpointer.alist(config)]
        latest = await self.runner.checkpointer.aget_tuple(config)
        return len(saved), len(latest.pending_writes or []) if latest else 0

    async def deliver(self) -> longcall.Deliverer:
        deliverer = self.app.deliverer(self.runner)
        await deliverer.run_once()
        return deliverer


def build_graph(tool: Any, model: ScriptedChatModel, *, apart: bool) -> StateGraph[Any]:
    bound = model.bind_tools([tool])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def agent_async(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=agent_async))
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "agent")
    route = send_each_tool_call("tools") if apart else tools_condition
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def make_agent(
    url: str,
    saver: BaseCheckpointSaver[Any],
    *,
    clock: longcall.FakeClock | None = None,
    apart: bool = True,
    deadline: str | None = None,
    key: str | None = None,
) -> Agent:
    app = longcall.App(url, clock=clock)
    submitted: list[str] = []

    def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
        """Exports the user's data; the link arrives later."""
        submitted.append(job.id)
        return {"message": f"Exporting {export_type} data."}

    tool = long_running_tool(app, export_data, deadline=deadline, key=key)
    graph = build_graph(tool, ScriptedChatModel(rules=RULES), apart=apart).compile(
        checkpointer=saver
    )
    return Agent(app, LangGraphRunner(graph, app_name=APP), saver, submitted)


@pytest.fixture
def checkpoints(tmp_path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


@pytest.fixture
def agent(db_url: str, checkpoints: SqliteSaver) -> Iterator[Agent]:
    made = make_agent(db_url, checkpoints)
    yield made
    made.app.close()


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """The async test run to its end on a fresh event loop (as the rest of the suite does)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def answers(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, AIMessage) and m.content]


async def until_delivered(app: longcall.App, job_ids: list[str], limit: float = 20) -> None:
    for _ in range(int(limit / 0.05)):
        jobs = [await app.get_job_async(j) for j in job_ids]
        if all(j.delivered_at is not None for j in jobs):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not delivered within {limit} s: {jobs}")


@in_loop
async def test_a_call_records_its_whole_join_and_the_worker_resumes_it(agent: Agent) -> None:
    """The job joins app, user, thread, call and model message; the worker's delivery answers
    the call under its original id and name, and the model tells the user."""
    events = await agent.turn("please export csv")
    [job] = await agent.jobs()
    [call_message] = [m for m in await agent.messages() if isinstance(m, AIMessage)]
    [call] = call_message.tool_calls
    assert (job.app_name, job.user_id, job.session_id) == (APP, USER, THREAD)
    assert (job.call_id, job.invocation_id) == (call["id"], call_message.id)
    assert job.tool_name == "export_data"
    pending = [r for e in events for r in e.function_responses]
    assert [(r.id, r.response["status"], r.response["jobId"]) for r in pending] == [
        (call["id"], "pending", job.job_id)
    ]

    await agent.app.complete_async(job.job_id, {"url": "https://example.com/x.csv"})
    worker = agent.app.worker(agent.runner, poll_interval="50ms")
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await until_delivered(agent.app, [job.job_id])
    finally:
        worker.stop()
        await running
    messages = await agent.messages()
    [answer] = tool_messages(messages)
    assert (answer.tool_call_id, answer.name) == (call["id"], "export_data")
    assert answer.artifact == {
        "status": "succeeded",
        "jobId": job.job_id,
        "result": {"url": "https://example.com/x.csv"},
    }
    assert answers(messages) == ["export_data has finished: url https://example.com/x.csv."]
    assert agent.submitted == [job.job_id]
    assert isinstance(agent.runner, AgentRunner) and isinstance(agent.runner, TranscriptSource)
    shown = await agent.runner.transcript(user_id=USER, session_id=THREAD)
    assert [e.author for e in shown] == ["human", "model", "tools", "model"]
    assert shown[2].function_responses[0].id == call["id"]
    assert await agent.runner.transcript(user_id="mallory", session_id=THREAD) == []


@in_loop
async def test_the_tool_run_again_on_resume_finds_its_own_job(
    agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    """LangGraph re-runs the interrupted tool from its start: it finds the job it recorded
    (no second job, no second submission, no conflict) and returns the resume value."""
    caplog.set_level(logging.WARNING, logger="longcall")
    tool = agent.app.tools["export_data"]
    calls: list[dict[str, Any]] = []
    invoke = tool.invoke_async

    async def counting(args: Any, ids: Any = None, context: Any = ()) -> dict[str, Any]:
        answer = await invoke(args, ids, context)
        calls.append(answer)
        return answer

    tool.invoke_async = counting  # type: ignore[method-assign]
    await agent.turn("please export csv")
    [job] = await agent.jobs()
    await agent.app.complete_async(job.job_id, "done")
    deliverer = await agent.deliver()
    assert deliverer.stats["delivered"] == 1
    assert [c["jobId"] for c in calls] == [job.job_id, job.job_id]
    assert len(await agent.jobs()) == 1
    assert agent.submitted == [job.job_id]
    assert [r.message for r in caplog.records if r.levelno >= logging.WARNING] == []


@in_loop
async def test_parallel_calls_wait_apart_and_the_model_answers_once_both_are_in(
    agent: Agent,
) -> None:
    """Two calls in one message wait in two interrupts; the first result is kept as its
    task's write (delivered once, the model not yet asked), the second resumes the step and
    the model answers about both, each under its own call id."""
    await agent.turn("export csv and json")
    csv, json_ = await agent.jobs()
    assert csv.call_id != json_.call_id and csv.invocation_id == json_.invocation_id

    await agent.app.complete_async(csv.job_id, "csv ready")
    assert (await agent.deliver()).stats["delivered"] == 1
    assert answers(await agent.messages()) == []
    assert await agent.runner.has_function_response(
        user_id=USER, session_id=THREAD, call_id=csv.call_id or ""
    )
    assert not await agent.runner.has_function_response(
        user_id=USER, session_id=THREAD, call_id=json_.call_id or ""
    )

    await agent.app.complete_async(json_.job_id, "json ready")
    assert (await agent.deliver()).stats["delivered"] == 1
    messages = await agent.messages()
    by_call = {m.tool_call_id: m.artifact["result"] for m in tool_messages(messages)}
    assert by_call == {csv.call_id: "csv ready", json_.call_id: "json ready"}
    assert len(answers(messages)) == 1
    assert sorted(agent.submitted) == sorted([csv.job_id, json_.job_id])


@in_loop
async def test_parallel_results_ready_together_resume_in_one_command(agent: Agent) -> None:
    """Both results in before the deliverer runs: one message, one graph run, one answer."""
    await agent.turn("export csv and json")
    csv, json_ = await agent.jobs()
    await agent.app.complete_async(csv.job_id, "a")
    await agent.app.complete_async(json_.job_id, "b")
    deliverer = await agent.deliver()
    assert deliverer.stats["delivered"] == 2
    messages = await agent.messages()
    assert len(tool_messages(messages)) == 2
    assert answers(messages) == ["export_data has finished: a. export_data has finished: b."]


@in_loop
async def test_several_long_running_calls_in_one_task_are_refused_and_start_nothing(
    db_url: str, checkpoints: SqliteSaver
) -> None:
    """Behind tools_condition all calls of a message share one task, where their interrupts
    could not be told apart: each is answered with an error and no job is made."""
    agent = make_agent(db_url, checkpoints, apart=False)
    try:
        await agent.turn("export csv and json")
        assert await agent.jobs() == []
        refused = tool_messages(await agent.messages())
        assert [m.artifact["status"] for m in refused] == ["error", "error"]
        assert "send_each_tool_call" in refused[0].artifact["message"]
        # One call in that graph waits and resumes as usual.
        await agent.turn("export xml", session="t2")
        [job] = await agent.jobs("t2")
        await agent.app.complete_async(job.job_id, "x")
        assert (await agent.deliver()).stats["delivered"] == 1
    finally:
        agent.app.close()


@in_loop
async def test_a_result_already_in_the_thread_is_not_delivered_again(agent: Agent) -> None:
    """A delivery that reached the thread before a crash lost its bookkeeping: the deliverer
    finds the answer in the checkpoint and only marks the job delivered."""
    await agent.turn("please export csv")
    [job] = await agent.jobs()
    await agent.app.complete_async(job.job_id, "ready")
    assert (await agent.app.complete_async(job.job_id, "again")).changed is False
    done = await agent.app.get_job_async(job.job_id)
    # The crashed holder's run, straight through the runner: the job stays undelivered.
    response = FunctionResponse(job.call_id or "", job.tool_name, final_response(done))
    async for _ in agent.runner.run(
        user_id=USER, session_id=THREAD, message=Message(function_responses=(response,))
    ):
        pass
    deliverer = await agent.deliver()
    assert deliverer.stats == {"already_in_session": 1}
    messages = await agent.messages()
    assert len(tool_messages(messages)) == 1 and len(answers(messages)) == 1
    with pytest.raises(UnknownCallError):
        async for _ in agent.runner.run(
            user_id=USER, session_id=THREAD, message=Message(function_responses=(response,))
        ):
            pass


@in_loop
async def test_an_expired_call_is_answered_with_its_deadline(
    db_url: str, checkpoints: SqliteSaver, clock: longcall.FakeClock
) -> None:
    """A result that never comes: the sweeper expires the job and the call is answered so."""
    agent = make_agent(db_url, checkpoints, clock=clock, deadline="30m")
    try:
        await agent.turn("please export csv")
        [job] = await agent.jobs()
        clock.advance(31 * 60)
        assert [j.job_id for j in await agent.app.sweeper().run_once()] == [job.job_id]
        assert (await agent.deliver()).stats["delivered"] == 1
        [answer] = tool_messages(await agent.messages())
        assert answer.artifact["status"] == "expired"
        assert "did not finish in time" in answers(await agent.messages())[0]
    finally:
        agent.app.close()


@in_loop
async def test_a_user_turn_while_calls_wait_is_refused_before_anything_is_written(
    agent: Agent,
) -> None:
    """A new message would make LangGraph drop the waiting calls: the turn is refused, the
    thread unchanged; once the result is in, the user talks again."""
    await agent.turn("please export csv")
    [job] = await agent.jobs()
    before = await agent.checkpoints()
    with pytest.raises(CallsPending) as refused:
        await agent.turn("hello")
    assert refused.value.call_ids == [job.call_id]
    assert await agent.checkpoints() == before
    await agent.app.complete_async(job.job_id, "ready")
    await agent.deliver()
    await agent.turn("hello")
    assert answers(await agent.messages())[-1] == "Hello!"


@in_loop
async def test_a_response_to_an_unknown_call_raises_before_anything_is_written(
    agent: Agent,
) -> None:
    """UnknownCallError for a call the thread does not wait on, or for a real call sent as
    another user (whose turn is refused too); the checkpoints untouched."""
    await agent.turn("please export csv")
    before = await agent.checkpoints()
    stray = FunctionResponse("call_nobody_made", "export_data", {"status": "succeeded"})
    with pytest.raises(UnknownCallError, match="call_nobody_made"):
        async for _ in agent.runner.run(
            user_id=USER, session_id=THREAD, message=Message(function_responses=(stray,))
        ):
            pass
    [job] = await agent.jobs()
    real = FunctionResponse(job.call_id or "", "export_data", {"status": "succeeded"})
    with pytest.raises(UnknownCallError, match="another user"):
        async for _ in agent.runner.run(
            user_id="mallory", session_id=THREAD, message=Message(function_responses=(real,))
        ):
            pass
    with pytest.raises(AgentError, match="another user"):
        await agent.app.run_turn_async(
            agent.runner, user_id="mallory", session_id=THREAD, text="hello"
        )
    assert await agent.checkpoints() == before


def fence_held_for(checks: int) -> tuple[Fence, list[int]]:
    """A fence that is held for its first ``checks`` checks, then lost."""
    seen: list[int] = []

    def held() -> bool:
        seen.append(1)
        return len(seen) <= checks

    return Fence(SessionKey(APP, USER, THREAD), "holder", 7, held), seen


@pytest.mark.parametrize("held_for", [0, 1])
@in_loop
async def test_a_delivery_that_lost_its_fence_writes_no_further_checkpoint(
    agent: Agent, held_for: int
) -> None:
    """FenceLost instead of the write: nothing (held for none) or only the first write
    (held for one) reaches the checkpointer and the model's answer is never stored; the next
    delivery answers the call once (going on with the open step) and the model answers."""
    await agent.turn("please export csv")
    [job] = await agent.jobs()
    await agent.app.complete_async(job.job_id, "ready")
    done = await agent.app.get_job_async(job.job_id)
    response = FunctionResponse(job.call_id or "", job.tool_name, final_response(done))
    before = await agent.checkpoints()
    fence, checks = fence_held_for(held_for)
    with pytest.raises(FenceLost):
        async for _ in agent.runner.run(
            user_id=USER,
            session_id=THREAD,
            message=Message(function_responses=(response,), fence=fence),
        ):
            pass
    assert len(checks) > held_for
    assert answers(await agent.messages()) == []
    if held_for == 0:
        assert await agent.checkpoints() == before
    # The job is still to deliver, and a delivery holding the session does it.
    deliverer = await agent.deliver()
    assert deliverer.stats == {"delivered": 1}
    messages = await agent.messages()
    assert len(tool_messages(messages)) == 1 and len(answers(messages)) == 1


@in_loop
async def test_a_new_process_resumes_the_waiting_call_from_the_files(
    db_url: str, tmp_path: Path
) -> None:
    """Restart: a new App, graph, runner and AsyncSqliteSaver over the same files resume the
    call the first process left waiting; the tool finds its job again, none is made twice."""
    path = tmp_path / "checkpoints.db"
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        first = make_agent(db_url, saver)
        await first.turn("please export csv")
        [job] = await first.jobs()
        first.app.close()

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        second = make_agent(db_url, saver)
        try:
            await second.app.complete_async(job.job_id, "after the restart")
            assert (await second.deliver()).stats["delivered"] == 1
            messages = await second.messages()
            assert [m.tool_call_id for m in tool_messages(messages)] == [job.call_id]
            assert answers(messages) == ["export_data has finished: after the restart."]
            assert [j.job_id for j in await second.jobs()] == [job.job_id]
            assert second.submitted == []
        finally:
            second.app.close()


@in_loop
async def test_a_prebuilt_react_agent_takes_the_tool(db_url: str, checkpoints: SqliteSaver) -> None:
    """create_react_agent (its default sends each call to its own task) with the tool and the
    scripted model: two parallel calls resumed through the runner."""
    from langgraph.prebuilt import create_react_agent

    app = longcall.App(db_url)
    try:
        tool = long_running_tool(app, _export_data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # moved to langchain.agents
            graph = create_react_agent(
                ScriptedChatModel(rules=RULES), [tool], checkpointer=checkpoints
            )
        agent = Agent(app, LangGraphRunner(graph, app_name=APP), checkpoints)
        await agent.turn("export csv and json")
        jobs = await agent.jobs()
        for job in jobs:
            await app.complete_async(job.job_id, job.args["export_type"])
        assert (await agent.deliver()).stats["delivered"] == 2
        messages = await agent.messages()
        assert {m.tool_call_id for m in tool_messages(messages)} == {j.call_id for j in jobs}
        assert answers(messages) == [
            "export_data has finished: csv. export_data has finished: json."
        ]
    finally:
        app.close()


def _export_data(export_type: str) -> str:
    """Exports the user's data; the link arrives later."""
    return f"Exporting {export_type}."


_export_data.__name__ = "export_data"


def test_the_runner_needs_a_checkpointer(db_url: str) -> None:
    """A graph without a checkpointer cannot keep an interrupt: refused at construction."""
    app = longcall.App(db_url)
    try:
        tool = long_running_tool(app, _export_data)
        graph = build_graph(tool, ScriptedChatModel(rules=RULES), apart=True).compile()
        with pytest.raises(longcall.ConfigError, match="checkpointer"):
            LangGraphRunner(graph, app_name=APP)
    finally:
        app.close()


def test_importing_longcall_imports_no_langgraph() -> None:
    """The adapter is an extra: ``import longcall`` never loads langgraph or langchain."""
    code = (
        "import sys, longcall, longcall.testing; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('langgraph', 'langchain_core')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@in_loop
async def test_bad_arguments_get_an_error_answer_and_no_job(agent: Agent) -> None:
    """A call the function's types refuse is answered at once with the error map."""
    rules = [longcall.Rule(r"broken", calls=[("export_data", {"export_type": 3, "x": 1})])]
    app = longcall.App(agent.app.url)
    try:
        tool = long_running_tool(app, _export_data)
        graph = build_graph(tool, ScriptedChatModel(rules=rules), apart=True).compile(
            checkpointer=agent.saver
        )
        runner = LangGraphRunner(graph, app_name=APP)
        await app.run_turn_async(runner, user_id=USER, session_id="t-bad", text="broken")
        assert await app.list_jobs_async(session_id="t-bad") == []
        state = await runner.graph.aget_state({"configurable": {"thread_id": "t-bad"}})
        [answer] = tool_messages(state.values["messages"])
        assert answer.artifact["status"] == "error"
        assert "unexpected argument" in answer.content and "export_type" in answer.content
    finally:
        app.close()


@in_loop
async def test_progress_is_not_written_and_the_call_keeps_waiting(agent: Agent) -> None:
    """A progress update the model should hear of has no place in an open LangGraph call:
    the delivery writes nothing, and the result later closes the call."""
    await agent.turn("please export csv")
    [job] = await agent.jobs()
    before = await agent.checkpoints()
    await agent.app.progress_async(job.job_id, {"percent": 50}, notify_model=True)
    assert (await agent.deliver()).stats == {"progress_delivered": 1}
    assert await agent.checkpoints() == before
    await agent.app.complete_async(job.job_id, "ready")
    assert (await agent.deliver()).stats["delivered"] == 1
    [answer] = tool_messages(await agent.messages())
    assert answer.artifact["status"] == "succeeded"


@in_loop
async def test_a_result_that_comes_during_the_calling_turn_waits_for_the_turn(
    db_url: str, checkpoints: SqliteSaver
) -> None:
    """The job completes while the turn that called it still runs (the work was instant):
    the worker waits for the turn's session lease, then resumes the interrupt, never
    before it exists."""
    agent = make_agent(db_url, checkpoints)
    app = agent.app

    def instant(export_type: str, job: longcall.JobHandle) -> str:
        """Exports at once."""
        app.complete(job.id, f"{export_type} at once")
        return "done already"

    tool = long_running_tool(app, instant, name="export_now")
    rules = [longcall.Rule(r"now", calls=[("export_now", {"export_type": "csv"})])]
    graph = build_graph(tool, ScriptedChatModel(rules=rules), apart=True).compile(
        checkpointer=checkpoints
    )
    runner = LangGraphRunner(graph, app_name=APP)
    worker = app.worker(runner, poll_interval="20ms")
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await app.run_turn_async(runner, user_id=USER, session_id="t-now", text="now")
        [job] = await app.list_jobs_async(session_id="t-now")
        await until_delivered(app, [job.job_id])
        assert worker.deliverers[0].stats == {"delivered": 1}
        state = await runner.graph.aget_state({"configurable": {"thread_id": "t-now"}})
        assert answers(state.values["messages"]) == ["export_now has finished: csv at once."]
    finally:
        worker.stop()
        await running
        app.close()


def test_a_graph_the_application_runs_itself_is_resumed_by_the_runner(
    db_url: str, checkpoints: SqliteSaver
) -> None:
    """The application invokes the graph synchronously with its own config (thread and
    user): the tool's sync path records the job, and the runner delivers into that thread."""
    agent = make_agent(db_url, checkpoints)
    try:
        config: Any = {"configurable": {"thread_id": "t-sync", "user_id": USER}}
        out = agent.runner.graph.invoke({"messages": [("user", "export csv")]}, config)
        [pending] = out["__interrupt__"]
        [job] = agent.app.list_jobs(session_id="t-sync")
        assert pending.value["jobId"] == job.job_id and job.user_id == USER
        agent.app.complete(job.job_id, "sync ready")
        assert asyncio.run(agent.deliver()).stats["delivered"] == 1
        state = agent.runner.graph.get_state(config)
        assert answers(state.values["messages"]) == ["export_data has finished: sync ready."]
    finally:
        agent.app.close()


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"


def test_the_guides_code_runs_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/langgraph.md's block as written: a turn leaves the call waiting, a completion
    and the worker's deliverer resume it under the original call id."""
    match = re.search(r"<!-- docs-langgraph:.*?-->\s*```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert match, "the LangGraph guide lost its example"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(GUIDE), "exec"), namespace)
    jobs: longcall.App = namespace["jobs"]

    async def scenario() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as saver:
            runner: LangGraphRunner = await namespace["serve"](saver)
            [job] = await jobs.list_jobs_async(session_id="thread-1")
            await jobs.complete_async(job.job_id, {"url": "https://example.com/e.csv"})
            assert (await jobs.deliverer(runner).run_once()) == 1
            state = await runner.graph.aget_state({"configurable": {"thread_id": "thread-1"}})
            [answer] = tool_messages(state.values["messages"])
            assert (answer.tool_call_id, answer.name) == (job.call_id, "export_data")
            assert answers(state.values["messages"]) == [
                "export_data has finished: url https://example.com/e.csv."
            ]

    try:
        asyncio.run(scenario())
    finally:
        jobs.close()


@in_loop
async def test_a_key_that_finds_another_calls_job_answers_at_once(
    db_url: str, checkpoints: SqliteSaver
) -> None:
    """Two threads asking for the same keyed export share one job: the second call is told
    so and does not wait (its thread goes on), and the result goes to the first call alone."""
    agent = make_agent(db_url, checkpoints, key="export:{export_type}")
    try:
        await agent.turn("please export csv", session="first")
        await agent.turn("please export csv", session="second")
        [job] = await agent.app.list_jobs_async()
        assert job.session_id == "first" and agent.submitted == [job.job_id]
        [told] = tool_messages(await agent.messages("second"))
        assert told.artifact["jobId"] == job.job_id and "earlier call" in told.content
        assert answers(await agent.messages("second"))[0].startswith("I've started export_data")
        await agent.turn("hello", session="second")  # nothing waits there
        await agent.app.complete_async(job.job_id, "shared")
        assert (await agent.deliver()).stats == {"delivered": 1}
        assert len(tool_messages(await agent.messages("first"))) == 1
    finally:
        agent.app.close()


def test_the_model_sees_the_parameters_and_that_the_call_waits(db_url: str) -> None:
    """The tool's declaration: the function's own parameters (never the runtime or the job
    handle) and a note that the answer is the final result, not a pending status."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    app = longcall.App(db_url)
    try:
        declared = convert_to_openai_tool(_tool(app))
    finally:
        app.close()
    function = declared["function"]
    assert function["name"] == "export_data"
    assert function["parameters"]["properties"] == {"export_type": {"type": "string"}}
    assert function["parameters"]["required"] == ["export_type"]
    assert "final status and result" in function["description"]
    assert "pending status" not in function["description"]


def _tool(app: longcall.App) -> Any:
    def export_data(export_type: str, job: longcall.JobHandle) -> str:
        """Exports the user's data."""
        return "started"

    return long_running_tool(app, export_data)


class StallingModel(ScriptedChatModel):
    """The scripted model; with ``stall`` set it blocks its whole event loop once, when asked
    to answer a tool's result (as a frozen process would: no lease is renewed meanwhile)."""

    stall: Any = None

    async def _agenerate(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        if self.stall is not None and isinstance(messages[-1], ToolMessage):
            stall, self.stall = self.stall, None
            stall()
        return self._generate(messages, stop, None, **kwargs)


def test_a_stalled_delivery_overtaken_by_another_writes_nothing_more(
    db_url: str, tmp_path: Path
) -> None:
    """Delivery A freezes its event loop while the model answers; its leases run out and
    delivery B (another App, graph and checkpointer connection) delivers the same job. When A
    wakes, its fence is lost: the thread holds one answer to the call and one reply, B's."""
    path = tmp_path / "checkpoints.db"
    entered, b_done = threading.Event(), threading.Event()

    def build(model: ScriptedChatModel) -> tuple[longcall.App, LangGraphRunner, sqlite3.Connection]:
        app = longcall.App(db_url, session_lease="1s")
        tool = long_running_tool(app, _export_data)
        conn = sqlite3.connect(path, check_same_thread=False)
        graph = build_graph(tool, model, apart=True).compile(checkpointer=SqliteSaver(conn))
        return app, LangGraphRunner(graph, app_name=APP), conn

    def freeze() -> None:
        entered.set()
        assert b_done.wait(30), "delivery B did not finish"

    model_a = StallingModel(rules=RULES)
    app_a, runner_a, conn_a = build(model_a)
    app_b, runner_b, conn_b = build(ScriptedChatModel(rules=RULES))
    stats_b: dict[str, int] = {}

    def deliver_b() -> None:
        try:
            assert entered.wait(30), "delivery A never reached the model"
            time.sleep(1.5)  # A's claim and session lease (1 s) run out
            stats_b.update(asyncio.run(_run_once(app_b.deliverer(runner_b, lease="1s"))))
        finally:
            b_done.set()

    async def scenario() -> Counter[str]:
        await app_a.run_turn_async(runner_a, user_id=USER, session_id=THREAD, text="export csv")
        [job] = await app_a.list_jobs_async(session_id=THREAD)
        await app_a.complete_async(job.job_id, "ready")
        model_a.stall = freeze
        b = threading.Thread(target=deliver_b)
        b.start()
        deliverer_a = app_a.deliverer(runner_a, lease="1s")
        await deliverer_a.run_once()
        b.join(30)
        return deliverer_a.stats

    try:
        stats_a = asyncio.run(scenario())
        assert stats_b == {"delivered": 1}
        assert stats_a["delivered"] == 0 and stats_a["fence_lost"] == 1
        messages = runner_b.graph.get_state({"configurable": {"thread_id": THREAD}}).values[
            "messages"
        ]
        assert len(tool_messages(messages)) == 1
        assert answers(messages) == ["export_data has finished: ready."]
    finally:
        for app, conn in ((app_a, conn_a), (app_b, conn_b)):
            app.close()
            conn.close()


async def _run_once(deliverer: longcall.Deliverer) -> Counter[str]:
    await deliverer.run_once()
    return deliverer.stats
