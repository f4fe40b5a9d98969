"""A durable LangGraph agent: a data export that finishes long after the user's turn.

Run:  python agent.py "Export my data as CSV"

The model calls a long-running tool, which records a job and waits in a LangGraph interrupt;
the script then runs longcall's worker beside the graph and waits. Finish the export from
another terminal, as your batch system would:

    longcall jobs complete JOB_ID --result '{"url": "https://example.com/export.csv"}'

The worker resumes the thread with ``Command(resume=...)``: the tool answers its call with the
result, once, and the model tells the user. Everything is kept in two SQLite files (longcall's
jobs and LangGraph's checkpoints): stop the script while it waits, complete the job anyway,
start the script again, and the answer still arrives.

With OPENAI_API_KEY set and langchain-openai installed the graph runs on OpenAI; otherwise on
longcall's offline scripted chat model, so the example runs anywhere.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import longcall
from longcall.langgraph import (
    LangGraphRunner,
    ScriptedChatModel,
    long_running_tool,
    send_each_tool_call,
)

DATABASE = os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///longcall.db")
CHECKPOINTS = os.environ.get("LANGGRAPH_CHECKPOINTS_DB", "checkpoints.db")
USER, THREAD = "ana", "export-thread"

jobs = longcall.App(DATABASE)


def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
    """Exports the user's data in the given format (csv or json); the link comes later."""
    # submit_export(export_type, idempotency_key=job.id)   <- your batch system
    return {"message": f"Exporting {export_type} data.", "eta": "about 20 minutes"}


def model() -> BaseChatModel:
    """OpenAI when there is a key and its package; otherwise a model that follows one rule."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            print("(OPENAI_API_KEY is set but langchain-openai is not installed)", flush=True)
        else:
            return ChatOpenAI(model="gpt-4o-mini")
    export = longcall.Rule(
        r"export my data (?:as|to) (\w+)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    )
    return ScriptedChatModel(rules=[export])


export = long_running_tool(
    jobs, export_data, key="export:{session_id}:{export_type}", deadline="2h"
)
llm = model().bind_tools([export])


async def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await llm.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", call_model)
builder.add_node("tools", ToolNode([export]))
builder.add_edge(START, "agent")
# Each tool call in its own task: parallel long-running calls wait apart.
builder.add_conditional_edges("agent", send_each_tool_call("tools"), ["tools", END])
builder.add_edge("tools", "agent")


async def delivered(job_id: str) -> None:
    """Return once the worker has resumed the thread with the job's result."""
    # The completion comes from another process: the store is the one place to look.
    while True:
        if (await jobs.get_job_async(job_id)).delivered_at is not None:
            return
        await asyncio.sleep(0.2)


async def main(text: str) -> int:
    async with AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as checkpoints:
        runner = LangGraphRunner(builder.compile(checkpointer=checkpoints), app_name="exports")
        # Started again after a stop: the job is in the store already, so only wait for it.
        if not await jobs.list_jobs_async(session_id=THREAD, tool_name="export_data"):
            events = await jobs.run_turn_async(runner, user_id=USER, session_id=THREAD, text=text)
            for event in events:
                for response in event.function_responses:
                    if response.response.get("status") == "pending":
                        print(
                            f"pending: {response.name}: {response.response['message']}", flush=True
                        )
        [job] = await jobs.list_jobs_async(session_id=THREAD, tool_name="export_data")
        if job.delivered_at is None:
            print(f"job:   {job.job_id} ({job.state.value})", flush=True)
            print(
                f"finish it: longcall jobs complete '{job.job_id}' --database {DATABASE} "
                """--result '{"url": "https://example.com/export.csv"}'""",
                flush=True,
            )
        worker = jobs.worker(runner)
        working = asyncio.create_task(worker.run(handle_signals=False))
        await delivered(job.job_id)
        worker.stop()
        await working
        state = await runner.graph.aget_state({"configurable": {"thread_id": THREAD}})
        last = state.values["messages"][-1]
        if isinstance(last, AIMessage):
            print(f"agent: {last.text}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Export my data as CSV")))
    finally:
        jobs.close()
