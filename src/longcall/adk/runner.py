"""The resume loop's side of google-adk: deliver function responses with ``Runner.run_async``.

What ADK does that this runner absorbs: a response whose call id the session does not hold
raises before anything is stored (it becomes :class:`~longcall.errors.UnknownCallError`, and
the job is marked orphaned instead of retried); a response with ``id=None`` is dropped
silently (never sent: every response carries the original call id); a duplicate completion
makes the model answer again (:meth:`has_function_response` lets the deliverer check first);
and persistent session services raise a stale-session error when two runs overlap (retried
with backoff; the session lease makes it rare). A response with the right id and another name
is accepted silently, so each response goes under the name of the call it answers (a job
of a tool inside an ``AgentTool`` answers the AgentTool's call).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.session import Session
from google.genai import types

from longcall.adk.fencing import DELIVERY_FENCE, fence_appends
from longcall.agents import AgentEvent, FunctionCall, FunctionResponse, Message
from longcall.core.backoff import exponential
from longcall.errors import AgentError, UnknownCallError

log = logging.getLogger("longcall.adk")

# Set while the deliverer runs ADK: the deliverer already holds the session's lease, so the
# plugin must not wait for it (it would wait for itself).
RESUMING: contextvars.ContextVar[bool] = contextvars.ContextVar("longcall_resuming", default=False)

FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})


def to_agent_event(event: Event) -> AgentEvent:
    """An ADK event in longcall's framework-neutral terms."""
    text = None
    if event.content and event.content.parts:
        texts = [p.text for p in event.content.parts if p.text and not p.thought]
        text = "".join(texts) or None
    return AgentEvent(
        author=event.author,
        invocation_id=event.invocation_id,
        text=text,
        function_calls=tuple(
            FunctionCall(c.id or "", c.name or "", dict(c.args or {}))
            for c in event.get_function_calls()
        ),
        function_responses=tuple(
            FunctionResponse(r.id or "", r.name or "", dict(r.response or {}))
            for r in event.get_function_responses()
        ),
        long_running_ids=frozenset(event.long_running_tool_ids or ()),
    )


def to_content(message: Message) -> types.Content:
    """A longcall message as the user content ADK takes."""
    if message.text is not None:
        return types.Content(role="user", parts=[types.Part(text=message.text)])
    parts = []
    for response in message.function_responses:
        if not response.id:
            raise ValueError("a function response without its call id would be dropped by ADK")
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=response.id, name=response.name, response=response.response
                )
            )
        )
    return types.Content(role="user", parts=parts)


def call_names(session: Session) -> dict[str, str]:
    """Function call id -> the called tool's name, for every call the session holds."""
    return {
        call.id: call.name or ""
        for event in session.events
        for call in event.get_function_calls()
        if call.id
    }


def named_as_called(message: Message, names: Mapping[str, str]) -> Message:
    """``message`` with each response under the name of the call it answers.

    A job's response carries its tool's name; a job that answers an ``AgentTool``'s call
    (its tool ran in AgentTool's nested run) answers a call of another name, and a model
    must see the response under the name it called.
    """
    responses = tuple(
        dataclasses.replace(r, name=names.get(r.id) or r.name) for r in message.function_responses
    )
    return dataclasses.replace(message, function_responses=responses)


class KnownCalls:
    """Function calls (id -> tool name) seen per ADK session, for the last 1000 sessions.

    A call never leaves a session, so a call seen once needs no new load of the session to
    prove it exists (loads cost the most in a delivery).
    """

    def __init__(self, limit: int = 1000) -> None:
        self._calls: OrderedDict[tuple[str, str], dict[str, str]] = OrderedDict()
        self._limit = limit

    def saw(self, user_id: str, session_id: str, session: Session) -> None:
        self._calls[(user_id, session_id)] = call_names(session)
        self._calls.move_to_end((user_id, session_id))
        if len(self._calls) > self._limit:
            self._calls.popitem(last=False)

    async def names(
        self,
        message: Message,
        *,
        user_id: str,
        session_id: str,
        load: Callable[[], Awaitable[Session | None]],
        where: str = "",
    ) -> dict[str, str]:
        """The names of the calls ``message`` answers, loading the session (``load``, which
        calls :meth:`saw`) unless all were seen; UnknownCallError naming the first call the
        session does not hold (``where`` says where the session lives)."""
        wanted = {r.id for r in message.function_responses}
        known = self._calls.get((user_id, session_id), {})
        if not wanted <= known.keys():
            session = await load()
            known = call_names(session) if session is not None else {}
        unknown = sorted(wanted - known.keys())
        if unknown:
            raise UnknownCallError(
                f"ADK session {session_id!r} of user {user_id!r}{where} has no function call "
                f"{unknown[0]!r}"
            )
        return known

    async def content(
        self,
        message: Message,
        *,
        user_id: str,
        session_id: str,
        load: Callable[[], Awaitable[Session | None]],
        where: str = "",
    ) -> types.Content:
        """``message`` as ADK content, each response under the name of the call it answers
        (UnknownCallError for a call the session does not hold, as :meth:`names`)."""
        content = to_content(message)  # refuses a response without its call id, first
        if not message.function_responses:
            return content
        known = await self.names(
            message, user_id=user_id, session_id=session_id, load=load, where=where
        )
        return to_content(named_as_called(message, known))


def holds_final_response(session: Session, call_id: str) -> bool:
    """Whether ``session`` holds a closing (terminal) response to ``call_id``."""
    for event in session.events:
        for response in event.get_function_responses():
            body: dict[str, Any] = dict(response.response or {})
            if response.id == call_id and body.get("status") in FINAL_STATUSES:
                return True
    return False


class AdkAgentRunner:
    """An :class:`~longcall.agents.AgentRunner` over a google-adk ``Runner``.

    It wraps the runner's session service in a
    :class:`~longcall.adk.fencing.FencedSessionService`, so that a delivery whose holder lost
    the session's lease appends nothing more to it (user turns pass straight through).
    """

    def __init__(
        self, runner: Runner, *, stale_retries: int = 6, stale_backoff: float = 0.05
    ) -> None:
        fence_appends(runner)
        self.runner = runner
        self.app_name: str = runner.app_name
        self.stale_retries = stale_retries
        self.stale_backoff = stale_backoff
        self._known_calls = KnownCalls()

    async def _session(self, user_id: str, session_id: str) -> Session | None:
        session: Session | None = await self.runner.session_service.get_session(
            app_name=self.app_name, user_id=user_id, session_id=session_id
        )
        if session is not None:
            self._known_calls.saw(user_id, session_id, session)
        return session

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        content = await self._known_calls.content(
            message,
            user_id=user_id,
            session_id=session_id,
            load=functools.partial(self._session, user_id, session_id),
        )
        token = RESUMING.set(True)
        fence_token = DELIVERY_FENCE.set(message.fence)
        try:
            for attempt in range(1, self.stale_retries + 1):
                yielded = False
                try:
                    async for event in self.runner.run_async(
                        user_id=user_id, session_id=session_id, new_message=content
                    ):
                        yielded = True
                        yield to_agent_event(event)
                    return
                except StaleSessionError as exc:
                    # Raised when the user event is appended, before the model ran; once
                    # events went out, the run is not ours to repeat.
                    if yielded or attempt == self.stale_retries:
                        raise AgentError(f"ADK session {session_id!r} stayed stale: {exc}") from exc
                    delay = exponential(attempt, base=self.stale_backoff, cap=5.0)
                    log.warning("stale ADK session %s, retrying in %.2fs", session_id, delay)
                    await asyncio.sleep(delay)
                except ValueError as exc:
                    if "Function call not found" in str(exc):
                        raise UnknownCallError(str(exc)) from exc
                    raise
        finally:
            # A generator closed from another context (garbage collection) cannot reset.
            with contextlib.suppress(ValueError):
                DELIVERY_FENCE.reset(fence_token)
            with contextlib.suppress(ValueError):
                RESUMING.reset(token)

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The ADK session's events, in longcall's terms (empty for an unknown session)."""
        session = await self._session(user_id, session_id)
        return [] if session is None else [to_agent_event(e) for e in session.events]

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the session already holds a closing (terminal) response to ``call_id``."""
        session = await self._session(user_id, session_id)
        return session is not None and holds_final_response(session, call_id)
