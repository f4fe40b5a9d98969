"""``/v1/sessions/{sessionId}/transcript``: the conversation a job's results went back into.

A session is visible through its jobs: a caller who may see a job of the session may read
its transcript. The agent runner the server was given tells the conversation (any
:class:`~longcall.agents.TranscriptSource`); without one, the scripted agent's sessions in
longcall's own store still can be read.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.agents import AgentEvent, TranscriptSource
from longcall.app import App
from longcall.scripted import event_from_content
from longcall.server.auth import Principal
from longcall.server.errors import error
from longcall.server.jobs import authorized


def event_json(event: AgentEvent) -> dict[str, Any]:
    return {
        "author": event.author,
        "invocationId": event.invocation_id,
        "text": event.text,
        "functionCalls": [
            {"id": c.id, "name": c.name, "args": c.args} for c in event.function_calls
        ],
        "functionResponses": [
            {"id": r.id, "name": r.name, "response": r.response} for r in event.function_responses
        ],
    }


async def transcript(request: Request, app: App, who: Principal) -> Response:
    session_id = request.path_params["session_id"]
    jobs = await app.list_jobs_async(
        session_id=session_id, user_id=None if who.admin else who.user_id, limit=1
    )
    if not jobs or jobs[0].user_id is None:
        return error(404, "session_not_found", f"no session {session_id!r}", "sessionId")
    user_id = jobs[0].user_id
    agent = request.app.state.agent
    if isinstance(agent, TranscriptSource):
        events = await agent.transcript(user_id=user_id, session_id=session_id)
    else:
        stored = await app.in_thread(app.store.session_events, session_id)
        events = [event_from_content(e.author, e.invocation_id, e.content) for e in stored]
    return JSONResponse(
        {
            "sessionId": session_id,
            "userId": user_id,
            "events": [event_json(e) for e in events],
        }
    )


ROUTES = [
    Route("/v1/sessions/{session_id:path}/transcript", authorized(transcript), methods=["GET"]),
]
