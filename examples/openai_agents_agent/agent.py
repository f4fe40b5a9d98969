"""A durable OpenAI Agents SDK agent: a data export that finishes long after the user's turn.

Run:  python agent.py "Export my data as CSV"

The model calls a long-running tool; the SDK pauses the run on it, and longcall records a
job for the call and keeps the paused run. The script then runs longcall's worker and waits.
Finish the export from another terminal, as your batch system would:

    longcall jobs complete JOB_ID --result '{"url": "https://example.com/export.csv"}'

The worker resumes the paused run with the result, once, under the model's own call id, and
the agent tells the user. Everything is kept in two SQLite files (longcall's jobs; the SDK's
session and the paused run): stop the script while it waits, complete the job anyway, start
the script again, and the answer still arrives.

With OPENAI_API_KEY set the agent runs on an OpenAI model; without it, on longcall's offline
scripted model, so the example runs anywhere.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agents import Agent, set_tracing_disabled
from agents.models.interface import Model

import longcall
from longcall.openai_agents import OpenAIAgentsRunner, ScriptedModel, long_running_tool

DATABASE = os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///longcall.db")
CONVERSATIONS = os.environ.get("OPENAI_AGENTS_SESSIONS_DB", "conversations.db")
USER, SESSION = "ana", "export-session"

jobs = longcall.App(DATABASE)


def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
    """Exports the user's data in the given format (csv or json); the link comes later."""
    # submit_export(export_type, idempotency_key=job.id)   <- your batch system
    return {"message": f"Exporting {export_type} data.", "eta": "about 20 minutes"}


def model() -> str | Model:
    """An OpenAI model when there is a key for it; otherwise one that follows a rule offline."""
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
    set_tracing_disabled(True)  # no key: nowhere to send traces
    export = longcall.Rule(
        r"export my data (?:as|to) (\w+)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    )
    return ScriptedModel([export])


export = long_running_tool(
    jobs, export_data, key="export:{session_id}:{export_type}", deadline="2h"
)
agent = Agent(
    name="exporter",
    model=model(),
    tools=[export],
    instructions="Export the user's data with export_data when asked.",
)
runner = OpenAIAgentsRunner(agent, path=CONVERSATIONS)


async def say(text: str) -> None:
    """One user turn (holding the session's lease); prints what happened."""
    for event in await jobs.run_turn_async(runner, user_id=USER, session_id=SESSION, text=text):
        if event.author == "user":
            continue
        if event.text:
            print(f"agent: {event.text}", flush=True)
        for response in event.function_responses:
            if response.id in event.long_running_ids:
                print(
                    f"paused: {response.name} waits on job {response.response['jobId']}",
                    flush=True,
                )


async def delivered(job_id: str) -> None:
    """Return once the worker has resumed the run with the job's result."""
    # The completion comes from another process: the store is the one place to look.
    while True:
        if (await jobs.get_job_async(job_id)).delivered_at is not None:
            return
        await asyncio.sleep(0.2)


async def main(text: str) -> int:
    # Started again after a stop: the job is in the store already, so only wait for it.
    if not await jobs.list_jobs_async(session_id=SESSION, tool_name="export_data"):
        await say(text)
    [job] = await jobs.list_jobs_async(session_id=SESSION, tool_name="export_data")
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
    transcript = await runner.transcript(user_id=USER, session_id=SESSION)
    print(f"agent: {transcript[-1].text}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Export my data as CSV")))
    finally:
        jobs.close()
