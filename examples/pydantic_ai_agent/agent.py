"""A durable pydantic-ai agent: a data export that finishes long after the user's turn.

Run:  python agent.py "Export my data as CSV"

The agent calls a long-running tool, which records a job and defers the call (pydantic-ai's
CallDeferred); the script then runs longcall's worker beside the agent and waits. Finish the
export from another terminal, as your batch system would:

    longcall jobs complete JOB_ID --result '{"url": "https://example.com/export.csv"}'

The worker resumes the conversation with the result as the deferred call's return, under its
original tool call id, once, and the agent tells the user. The job and the conversation are
both in longcall's database (one SQLite file): stop the script while it waits, complete the
job anyway, start the script again, and the answer still arrives.

With PYDANTIC_AI_MODEL set (e.g. ``openai:gpt-4o``, plus that provider's API key) the agent
runs on that model; without it, on pydantic-ai's offline FunctionModel, so it runs anywhere.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

import longcall
from longcall.pydantic_ai import PydanticAiRunner, long_running_tool

DATABASE = os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///longcall.db")
USER, SESSION = "ana", "export-session"

jobs = longcall.App(DATABASE)


def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
    """Exports the user's data in the given format (csv or json); the link comes later."""
    # submit_export(export_type, idempotency_key=job.id)   <- your batch system
    return {"message": f"Exporting {export_type} data.", "eta": "about 20 minutes"}


def offline(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls export_data when asked to export; otherwise says what the tool answered."""
    last = messages[-1]
    parts = last.parts if isinstance(last, ModelRequest) else []
    for part in parts:
        if isinstance(part, ToolReturnPart) and isinstance(part.content, dict):
            body = part.content
            if body.get("status") == "succeeded":
                result = body.get("result") or {}
                link = result.get("url") if isinstance(result, dict) else result
                return ModelResponse(parts=[TextPart(f"Your export is ready: {link}")])
            return ModelResponse(parts=[TextPart(f"{part.tool_name} ended: {body['status']}")])
        if isinstance(part, UserPromptPart):
            asked = re.search(r"export my data (?:as|to) (\w+)", str(part.content), re.I)
            if asked:
                args = {"export_type": asked[1].lower()}
                return ModelResponse(parts=[ToolCallPart("export_data", args)])
    return ModelResponse(parts=[TextPart("I can export your data as CSV or JSON.")])


def model() -> Model | str:
    """The model PYDANTIC_AI_MODEL names (its key in the environment), else the offline one."""
    return os.environ.get("PYDANTIC_AI_MODEL") or FunctionModel(offline)


export = long_running_tool(
    jobs, export_data, key="export:{session_id}:{export_type}", deadline="2h"
)
agent = Agent(
    model(),
    name="exporter",
    tools=[export],
    output_type=[str, DeferredToolRequests],
    instructions="Export the user's data with export_data when asked.",
)
runner = PydanticAiRunner(agent, jobs, app_name="exports")


async def say(text: str) -> None:
    """One user turn, holding the session's lease; prints what the agent answers."""
    for event in await jobs.run_turn_async(runner, user_id=USER, session_id=SESSION, text=text):
        if event.author != "user" and event.text:
            print(f"agent: {event.text}", flush=True)
        for call in event.function_calls:
            print(f"agent: (calls {call.name} {call.args}, deferred)", flush=True)


async def delivered(job_id: str) -> None:
    """Return once the worker has resumed the conversation with the job's result."""
    # The completion comes from another process: the store is the one place to look.
    while True:
        if (await jobs.get_job_async(job_id)).delivered_at is not None:
            return
        await asyncio.sleep(0.2)


async def main(text: str) -> int:
    # Started again after a stop: the job is in the store already, so only wait for it.
    if not await jobs.list_jobs_async(session_id=SESSION, tool_name="export_data"):
        await say(text)
    found = await jobs.list_jobs_async(session_id=SESSION, tool_name="export_data")
    if not found:
        print("agent: (no export was started)", flush=True)
        return 1
    job = found[0]
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
    events = await runner.transcript(user_id=USER, session_id=SESSION)
    print(f"agent: {events[-1].text}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Export my data as CSV")))
    finally:
        jobs.close()
