"""An ADK agent whose `translate` tool is a remote MCP server's task tool, made durable.

    LONGCALL_TOKEN=<token> python agent.py http://127.0.0.1:8800/mcp [--stand-in-agency DB]

The remote server is examples/mcp_tasks (`longcall serve --app tools:app`). The agent's call
becomes a job in this desk's own database (DESK_DATABASE_URL, default sqlite:///desk.db)
waiting on the remote task; a RemoteTaskPoller answers it when the task ends, and the worker
resumes the agent once with the translation. The model is longcall's offline ScriptedLlm;
give LlmAgent a real model (e.g. "gemini-2.5-flash" with GOOGLE_API_KEY) and nothing else
changes. With --stand-in-agency the script completes the remote job itself (on the remote
server's database), as the agency's webhook would hours later.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from google.adk.agents import LlmAgent
from google.adk.apps import App as AdkApp
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.genai import types

from longcall import App, Delivery, Rule
from longcall.adk import AdkAgentRunner, LongcallPlugin, ScriptedLlm
from longcall.mcp import RemoteServer, RemoteTaskPoller, RemoteTasks
from longcall.mcp_adk import LongcallMcpToolset


async def main(url: str, token: str, agency_db: str | None) -> None:
    app = App(os.environ.get("DESK_DATABASE_URL", "sqlite:///desk.db"))
    remote = RemoteTasks(
        app, [RemoteServer("agency", url, headers={"authorization": f"Bearer {token}"})]
    )
    toolset = LongcallMcpToolset(remote, "agency", deadline="2d")
    model = ScriptedLlm(
        rules=[
            Rule(
                r"translate (\S+) into (\w+)",
                calls=[("translate", lambda m: {"document": m[1], "language": m[2]})],
            )
        ]
    )
    # ADK's sessions in a file too, so the resume finds the conversation after a restart.
    sessions = DatabaseSessionService("sqlite+aiosqlite:///desk_sessions.db")
    runner = Runner(
        app=AdkApp(
            name="desk",
            root_agent=LlmAgent(name="desk", model=model, tools=[toolset]),
            plugins=[LongcallPlugin(app)],
        ),
        session_service=sessions,
    )
    session = await sessions.create_session(app_name="desk", user_id="ana")
    ask = types.Content(role="user", parts=[types.Part(text="Translate minutes.pdf into Welsh")])
    async for event in runner.run_async(user_id="ana", session_id=session.id, new_message=ask):
        for part in event.content.parts if event.content and event.content.parts else []:
            if part.text:
                print(f"agent: {part.text}", flush=True)
    [job] = [j for j in await app.list_jobs_async() if j.session_id == session.id]
    task_id = remote.table.get(job.job_id)["task_id"]  # type: ignore[index]
    print(f"job {job.job_id} waits on remote task {task_id}", flush=True)

    worker = app.worker(AdkAgentRunner(runner))
    stop = asyncio.Event()
    loops = [
        asyncio.create_task(worker.run(handle_signals=False)),
        asyncio.create_task(RemoteTaskPoller(remote, base=0.5, cap=5).run(stop)),
    ]
    if agency_db:
        with App(agency_db) as agency:
            await agency.complete_async(task_id, {"translation": "cofnodion.pdf"})
    else:
        print(f"complete it: longcall jobs complete {task_id} --result '{{...}}'", flush=True)
    # The poller answers the job when the task ends; the worker's deliverer resumes the agent.
    while True:
        if (await app.get_job_async(job.job_id)).delivery is Delivery.DELIVERED:
            break
        await asyncio.sleep(0.2)
    worker.stop()
    stop.set()
    await asyncio.gather(*loops)
    resumed = await sessions.get_session(app_name="desk", user_id="ana", session_id=session.id)
    assert resumed is not None
    for event in resumed.events[-2:]:
        for part in event.content.parts if event.content and event.content.parts else []:
            if part.function_response:
                print(f"result: {part.function_response.response}", flush=True)
            if part.text:
                print(f"agent: {part.text}", flush=True)
    await toolset.close()
    app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the remote server's MCP endpoint, …/mcp")
    parser.add_argument("--stand-in-agency", metavar="DB", help="the remote server's database")
    args = parser.parse_args()
    asyncio.run(main(args.url, os.environ["LONGCALL_TOKEN"], args.stand_in_agency))
