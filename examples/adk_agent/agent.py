"""A durable google-adk agent: a data export that finishes long after the user's turn.

Run:  python agent.py "Export my data as CSV"

The agent calls a long-running tool, which records a job and answers "pending"; the script
then runs longcall's worker beside the agent and waits. Finish the export from another
terminal, as your batch system would:

    longcall jobs complete JOB_ID --result '{"url": "https://example.com/export.csv"}'

The worker resumes the ADK session with the result, once, and the agent tells the user.
Everything is kept in two SQLite files (longcall's jobs and ADK's sessions): stop the script
while it waits, complete the job anyway, start the script again, and the answer still arrives.

With GOOGLE_API_KEY set the agent runs on Gemini; without it, on longcall's offline scripted
model, so the example runs anywhere.
"""

from __future__ import annotations

import asyncio
import os
import sys

from google.adk.agents import LlmAgent
from google.adk.apps import App as AdkApp
from google.adk.models.base_llm import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

import longcall
from longcall.adk import AdkAgentRunner, LongcallPlugin, ScriptedLlm, long_running_tool

DATABASE = os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///longcall.db")
SESSIONS = os.environ.get("ADK_SESSIONS_DB", "sessions.db")
USER, SESSION = "ana", "export-session"

jobs = longcall.App(DATABASE)


def export_data(export_type: str, job: longcall.JobHandle) -> dict[str, str]:
    """Exports the user's data in the given format (csv or json); the link comes later."""
    # submit_export(export_type, idempotency_key=job.id)   <- your batch system
    return {"message": f"Exporting {export_type} data.", "eta": "about 20 minutes"}


def model() -> str | BaseLlm:
    """Gemini when there is a key for it; otherwise a model that follows one rule offline."""
    if os.environ.get("GOOGLE_API_KEY"):
        return "gemini-2.5-flash"
    export = longcall.Rule(
        r"export my data (?:as|to) (\w+)",
        calls=[("export_data", lambda m: {"export_type": m[1].lower()})],
    )
    return ScriptedLlm(rules=[export])


export = long_running_tool(
    jobs, export_data, key="export:{session_id}:{export_type}", deadline="2h"
)
agent = LlmAgent(
    name="exporter",
    model=model(),
    tools=[export],
    instruction="Export the user's data with export_data when asked.",
)
plugin = LongcallPlugin(jobs)
runner = Runner(
    app=AdkApp(name="exports", root_agent=agent, plugins=[plugin]),
    session_service=SqliteSessionService(SESSIONS),
)


async def say(text: str) -> None:
    """One user turn; prints what the agent answers."""
    sessions = runner.session_service
    if await sessions.get_session(app_name="exports", user_id=USER, session_id=SESSION) is None:
        await sessions.create_session(app_name="exports", user_id=USER, session_id=SESSION)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        for part in event.content.parts if event.content and event.content.parts else []:
            if part.text:
                print(f"agent: {part.text}", flush=True)
    # The plugin gives the session's lease back as the run ends, without holding it up; wait
    # for that here, so a script stopped right after the turn leaves the session free (else
    # the next delivery waits for the lease to run out, a minute by default).
    await plugin.settled()


async def delivered(job_id: str) -> None:
    """Return once the worker has resumed the session with the job's result."""
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
    worker = jobs.worker(AdkAgentRunner(runner))
    working = asyncio.create_task(worker.run(handle_signals=False))
    await delivered(job.job_id)
    worker.stop()
    await working
    session = await runner.session_service.get_session(
        app_name="exports", user_id=USER, session_id=SESSION
    )
    last = session.events[-1] if session else None
    texts = [p.text for p in (last.content.parts or []) if p.text] if last and last.content else []
    print(f"agent: {' '.join(texts)}", flush=True)
    await runner.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Export my data as CSV")))
    finally:
        jobs.close()
