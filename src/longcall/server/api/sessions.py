"""``/v1/sessions/{sessionId}/transcript``: the conversation a job's results went back into.

A session is the pair (user, session id): a user reads only their own, and only once they
have a job in it; another user's session of the same id answers 404 exactly as one that does
not exist. An admin reads any user's with ``?user=``. The agent runner the server was given
tells the conversation (any :class:`~longcall.agents.TranscriptSource`); without one, the
scripted agent's sessions in longcall's own store still can be read.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from longcall.agents import AgentEvent, TranscriptSource
from longcall.app import App
from longcall.server.api import models
from longcall.server.api.operation import Answer, Operation, query
from longcall.server.api.requests import authorized, reply
from longcall.server.auth import Principal
from longcall.server.errors import error
from longcall.testing.scripted import stored_transcript


def _event(event: AgentEvent) -> models.TranscriptEvent:
    return models.TranscriptEvent(
        author=event.author,
        invocation_id=event.invocation_id,
        text=event.text,
        function_calls=[
            models.FunctionCall(id=c.id, name=c.name, args=c.args) for c in event.function_calls
        ],
        function_responses=[
            models.FunctionResponse(id=r.id, name=r.name, response=r.response)
            for r in event.function_responses
        ],
    )


async def transcript(request: Request, app: App, who: Principal) -> Response:
    session_id = request.path_params["session_id"]
    user_id = await _session_user(request, app, who, session_id)
    if user_id is None:
        return error(404, "session_not_found", f"no session {session_id!r}", "sessionId")
    agent = request.app.state.agent
    if isinstance(agent, TranscriptSource):
        events = await agent.transcript(user_id=user_id, session_id=session_id)
    else:
        events = await app.in_thread(
            lambda: stored_transcript(app, session_id=session_id, user_id=user_id)
        )
    said = [_event(e) for e in events]
    return reply(models.Transcript(session_id=session_id, user_id=user_id, events=said))


async def _session_user(request: Request, app: App, who: Principal, session_id: str) -> str | None:
    """Whose session (user, ``session_id``) to read: the caller's own, or for an admin the
    ``?user=`` named (else the user of the session's newest job); None when there is none.

    A session exists for a user once that user has a job in it, so a session id that only
    another user has reads exactly as one that nobody has.
    """
    if who.admin:
        wanted = request.query_params.get("user")
    else:
        wanted = who.user_id
        if wanted is None:
            return None
    jobs = await app.list_jobs_async(session_id=session_id, user_id=wanted, limit=1)
    if not jobs or jobs[0].user_id is None:
        return None
    return jobs[0].user_id


OPERATIONS = (
    Operation(
        "GET",
        "/v1/sessions/{session_id:path}/transcript",
        authorized(transcript),
        tag="sessions",
        summary="The conversation of the caller's session (user, sessionId), once the caller has "
        "a job in it; another user's session of that id is a 404.",
        params=(
            query(
                "user",
                "admin tokens only: whose session to read (default: the user of the session's "
                "newest job); ignored for a user's token",
            ),
        ),
        answers={200: Answer("Its events, in order.", models.Transcript)},
        refusals=(401, 404, 503),
    ),
)
