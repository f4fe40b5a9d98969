"""The resume loop's side of the OpenAI Agents SDK: runs that pause on long-running calls.

A user's turn runs ``Runner.run`` into the SDK's own session. When the model calls a
longcall tool, the SDK pauses the run on the tool's approval; this runner records each such
call's job with the whole join (app, user, session, call id; the run's id as invocation id),
then keeps the paused ``RunState`` (``to_json``) and its open calls in a small SQLite file.
When the deliverer brings a job's result, the runner loads the paused state, approves the
answered calls and resumes the run once: the tool answers each with its result, so the model
reads it as the output of its original call (same call id, same tool name).

Parallel calls of one turn pause one run. Each result resumes it as it comes: the SDK runs
the approved calls and pauses again on the others without asking the model, which answers
once, when the last result is in (the deliverer sends results that are ready together in one
message, so they resume the run together).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, RunState, SQLiteSession
from agents.memory import Session
from agents.result import RunResult

from longcall.agents import AgentEvent, FunctionResponse, Message
from longcall.core.jobs import CallIds, SessionKey
from longcall.errors import AgentError, UnknownCallError
from longcall.openai_agents.events import items_events, paused_call_event, run_items
from longcall.openai_agents.history import history_in_call_order
from longcall.openai_agents.paused import OpenCall, PausedRuns
from longcall.openai_agents.sessions import GuardedSession, answered_calls
from longcall.openai_agents.tool import ANSWERS, longcall_tools

FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})


class OpenAIAgentsRunner:
    """An :class:`~longcall.agents.AgentRunner` (and transcript source) over an SDK agent.

    ``path``: the SQLite file of the SDK's sessions (``SQLiteSession``) and of the paused
    runs. ``sessions``: another session per (user id, session id) instead, such as the SDK's
    SQLAlchemy session; the paused runs stay in ``path``. ``app_name`` defaults to the
    agent's name; ``run_config`` and ``max_turns`` go to every ``Runner.run``.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        path: str | Path,
        app_name: str | None = None,
        sessions: Callable[[str, str], Session] | None = None,
        run_config: RunConfig | None = None,
        max_turns: int = 10,
    ) -> None:
        self.agent = agent
        self.app_name: str = app_name or agent.name
        self.tools = longcall_tools(agent)
        self.path = str(path)
        if self.path == ":memory:" or not self.path:
            raise ValueError(
                "path must name a SQLite file: the paused runs must outlive the process"
            )
        self.paused = PausedRuns(path)
        self._sessions = sessions
        # User turns read the history with each call right before its output (a user may
        # have talked while it was open); the user's own callback, if any, runs after.
        config = run_config or RunConfig()
        self.run_config = dataclasses.replace(
            config, session_input_callback=history_in_call_order(config.session_input_callback)
        )
        self.max_turns = max_turns

    def session(self, user_id: str, session_id: str) -> Session:
        """The SDK session of one conversation (one per app, user and session id)."""
        if self._sessions is not None:
            return self._sessions(user_id, session_id)
        return SQLiteSession(f"{self.app_name}/{user_id}/{session_id}", self.path)

    @contextlib.asynccontextmanager
    async def _opened(self, user_id: str, session_id: str) -> AsyncIterator[Session]:
        """:meth:`session` for one use; a ``SQLiteSession`` of the runner's own is closed
        after it (it keeps a connection per thread it ran in, open until closed)."""
        session = self.session(user_id, session_id)
        try:
            yield session
        finally:
            if isinstance(session, SQLiteSession) and self._sessions is None:
                session.close()

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        key = SessionKey(self.app_name, user_id, session_id)
        async with self._opened(user_id, session_id) as opened:
            session = GuardedSession(opened, message.fence)
            if message.text is not None:
                run_id = f"run-{uuid.uuid4().hex}"
                result = await Runner.run(
                    self.agent,
                    message.text,
                    session=session,
                    run_config=self.run_config,
                    max_turns=self.max_turns,
                )
                async for event in self._settle(key, session, run_id, result):
                    yield event
                return
            runs = await self._paused_runs(key, session, message.function_responses)
            for run_id, responses in runs.items():
                async for event in self._resume(key, session, run_id, responses, message):
                    yield event

    async def _paused_runs(
        self, key: SessionKey, session: Session, responses: Iterable[FunctionResponse]
    ) -> dict[str, list[FunctionResponse]]:
        """The final responses per paused run they answer, each under its call's tool name.

        UnknownCallError, before anything is stored, for a call no paused run of the session
        waits on and the session has not seen answered. A response the session already
        holds (a duplicate) is left out, and so is progress: a paused call has no place for
        it, and its answer is the job's end.
        """
        responses = list(responses)
        if any(not r.id for r in responses):
            raise ValueError("a function response without its call id cannot be delivered")
        open_calls = await self.paused.open_calls_async(key, [r.id for r in responses])
        answered = await answered_calls(session)
        runs: dict[str, list[FunctionResponse]] = {}
        for response in responses:
            call = open_calls.get(response.id)
            if call is None:
                if response.id in answered:
                    continue
                raise UnknownCallError(
                    f"no paused run of OpenAI Agents session {key} waits on call {response.id!r}"
                )
            if response.response.get("status") not in FINAL_STATUSES:
                continue
            runs.setdefault(call.run_id, []).append(
                FunctionResponse(call.call_id, call.tool_name, response.response)
            )
        return runs

    async def _resume(
        self,
        key: SessionKey,
        session: Session,
        run_id: str,
        responses: list[FunctionResponse],
        message: Message,
    ) -> AsyncIterator[AgentEvent]:
        saved = await self.paused.state_async(run_id)
        if saved is None:
            raise UnknownCallError(f"paused run {run_id!r} of session {key} is gone")
        state: RunState[Any] = await RunState.from_json(self.agent, saved)
        answers = {r.id: r.response for r in responses}
        paused_on = state.get_interruptions()
        for item in paused_on:
            if item.call_id in answers:
                state.approve(item)
        if message.fence is not None:
            await message.fence.check_async()  # before the model runs, not only at the write
        token = ANSWERS.set(answers)
        try:
            result = await Runner.run(
                self.agent,
                state,
                session=session,
                run_config=self.run_config,
                max_turns=self.max_turns,
            )
        finally:
            ANSWERS.reset(token)
        reported = {str(item.call_id): str(item.name) for item in paused_on}
        async for event in self._settle(key, session, run_id, result, reported=reported):
            yield event

    async def _settle(
        self,
        key: SessionKey,
        session: Session,
        run_id: str,
        result: RunResult,
        *,
        reported: Mapping[str, str] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Report the run's events (but the calls in ``reported``, id -> tool name, which the
        pause reported); record the jobs of the calls it paused on and keep it paused, or
        forget it once it ran to its end. A call whose job could not start (bad arguments)
        is answered at once with the error, in a resume of its own."""
        author = result.last_agent.name
        items = [
            i
            for i in run_items(result.new_items)
            if not (i.get("type") == "function_call" and i.get("call_id") in (reported or {}))
        ]
        for event in items_events(items, author=author, invocation_id=run_id, called=reported):
            yield event
        if not result.interruptions:
            await self.paused.finish_async(run_id)
            return
        open_calls: list[OpenCall] = []
        refused: list[FunctionResponse] = []
        # A resume that answered some of its run's calls pauses again on the others: their
        # jobs are recorded and reported already.
        still_open = await self.paused.open_calls_async(
            key, [str(i.call_id) for i in result.interruptions]
        )
        for item in result.interruptions:
            if (known := still_open.get(str(item.call_id))) is not None:
                open_calls.append(OpenCall(known.call_id, known.tool_name, run_id))
                continue
            tool = self.tools.get(str(item.name))
            if tool is None:
                raise AgentError(
                    f"run {run_id} paused on tool {item.name!r}, which is not a longcall "
                    "tool of this runner's agent"
                )
            call_id = str(item.call_id)
            ids = CallIds(self.app_name, key.user_id, key.session_id, call_id, run_id)
            args = _arguments(item.arguments)
            answer = await tool.job_tool.invoke_async(args, ids)
            yield paused_call_event(item, answer, author=author, invocation_id=run_id)
            if "jobId" in answer:
                open_calls.append(OpenCall(call_id, tool.name, run_id))
            else:
                refused.append(FunctionResponse(call_id, tool.name, answer))
        await self.paused.pause_async(key, run_id, result.to_state().to_json(), open_calls)
        if refused:
            async for event in self._resume(
                key, session, run_id, refused, Message(function_responses=tuple(refused))
            ):
                yield event

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the session holds the output for ``call_id`` and no paused run still
        waits on it. The SDK stores a resumed call's output before it asks the model: a
        resume whose model turn failed left the output, but not the answer, and is retried."""
        key = SessionKey(self.app_name, user_id, session_id)
        if await self.paused.open_calls_async(key, [call_id]):
            return False
        async with self._opened(user_id, session_id) as session:
            return call_id in await answered_calls(session)

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The SDK session's items in longcall's terms (empty for an unknown session)."""
        async with self._opened(user_id, session_id) as session:
            items = await session.get_items()
        events = items_events(
            [dict(i) for i in items], author=self.agent.name, invocation_id=session_id
        )
        # The calls of longcall's tools are the long-running ones (the dashboard marks them).
        return [
            dataclasses.replace(
                e,
                long_running_ids=frozenset(c.id for c in e.function_calls if c.name in self.tools),
            )
            if e.function_calls
            else e
            for e in events
        ]


def _arguments(arguments: str | None) -> dict[str, Any]:
    """A call's arguments as a mapping; a model that sent something else gets the tool's
    argument error (an empty mapping lacks the required arguments)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {"(arguments)": arguments}
    return parsed if isinstance(parsed, dict) else {"(arguments)": parsed}
