"""The resume loop's side of pydantic-ai: a session's history in longcall's database, and
deferred tool results under the original call ids.

pydantic-ai has no session store and resumes deferred calls only all at once: a run given
``deferred_tool_results`` must answer every deferred call of the last response, and a run
with a new prompt is refused while any is unanswered. So, for each run into a session:

- the calls still open (deferred in the last response) are answered together: each with its
  delivered response when it has one, the others with a pending note (``status: pending``,
  "its result will follow in a later message"), which makes them *noted*;
- a response to a noted call (its call was answered for now earlier) cannot be a tool return
  any more (providers refuse a tool result that does not follow its call), so it reaches the
  model as a user-prompt part that names the call id and tool name and carries the response;
- a user's text while calls are open answers them with the pending note in the same request.

A call is *answered* once a closing response (succeeded, failed, expired, cancelled) is in
the history, however it got there; a repeat of it is dropped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from longcall.agents import AgentEvent, FunctionResponse, Message
from longcall.app import App
from longcall.core.jobs import SessionKey
from longcall.errors import AgentError, UnknownCallError
from longcall.pydantic_ai._events import to_agent_event
from longcall.pydantic_ai._sessions import (
    CallRecord,
    CallState,
    Conversation,
    Conversations,
    OpenedCall,
)
from longcall.pydantic_ai._tool import CURRENT_SESSION

FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})
LATER = "Still running: its result will follow in a later message."


def pending_note(call: CallRecord) -> dict[str, Any]:
    """What an open call is answered with when a run must close it before its job ends."""
    note: dict[str, Any] = {"status": "pending", "message": LATER}
    if call.job_id:
        note["jobId"] = call.job_id
    return note


def late_note(response: FunctionResponse) -> str:
    """A response to a call already answered for now, as the user-prompt text the model reads."""
    return (
        f"[longcall] A new response to your earlier call {response.id} of tool "
        f"{response.name}: {json.dumps(response.response, ensure_ascii=False, default=str)}"
    )


def is_final(body: dict[str, Any]) -> bool:
    return body.get("status") in FINAL_STATUSES


class PydanticAiRunner:
    """An :class:`~longcall.agents.AgentRunner` (and ``TranscriptSource``) over a pydantic-ai
    ``Agent`` whose long-running tools come from :func:`long_running_tool`.

    Sessions are ``(app_name, user_id, session_id)`` and live in ``app``'s database. The agent's
    ``output_type`` must include ``DeferredToolRequests``.
    """

    def __init__(self, agent: Agent[Any, Any], app: App, *, app_name: str | None = None) -> None:
        if DeferredToolRequests not in _output_types(agent):
            raise ValueError(
                "the agent's output_type must include DeferredToolRequests, e.g. "
                "Agent(..., output_type=[str, DeferredToolRequests]), or its long-running "
                "calls cannot be deferred"
            )
        self.agent = agent
        self.app = app
        self.app_name: str = app_name or agent.name or "pydantic-ai"
        self.author = agent.name or "agent"
        self.conversations = Conversations(app.store)

    def _key(self, user_id: str, session_id: str) -> SessionKey:
        return SessionKey(self.app_name, user_id, session_id)

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        key = self._key(user_id, session_id)
        conversation = await self.app.in_thread(self.conversations.load, key)
        plan = _plan(conversation, message)
        if plan is None:
            return  # every response was a repeat of one the session holds already
        prompt, results, states = plan
        token = CURRENT_SESSION.set(key)
        try:
            result = await self.agent.run(
                prompt,
                message_history=conversation.messages,
                deferred_tool_results=DeferredToolResults(calls=results) if results else None,
            )
        finally:
            CURRENT_SESSION.reset(token)
        new = result.new_messages()
        opened = _opened(result.output, new)
        fence = message.fence
        await self.app.in_thread(
            self.conversations.append,
            key,
            after_seq=conversation.last_seq,
            messages=new,
            states=states,
            opened=opened,
            fence=None if fence is None else (fence.holder, fence.token),
        )
        long_running = frozenset(c.call_id for c in opened)
        for model_message in new:
            yield to_agent_event(model_message, author=self.author, long_running=long_running)

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the session already holds a closing response to ``call_id``."""
        key = self._key(user_id, session_id)
        return await self.app.in_thread(self.conversations.answered, key, call_id)

    async def history(self, *, user_id: str, session_id: str) -> list[ModelMessage]:
        """The session's pydantic-ai messages, as the agent will see them next."""
        key = self._key(user_id, session_id)
        return (await self.app.in_thread(self.conversations.load, key)).messages

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The session's messages in longcall's terms (empty for an unknown session)."""
        conversation = await self.app.in_thread(
            self.conversations.load, self._key(user_id, session_id)
        )
        long_running = frozenset(conversation.calls)
        return [
            to_agent_event(m, author=self.author, long_running=long_running)
            for m in conversation.messages
        ]


Plan = tuple[str | None, dict[str, Any], dict[str, CallState]]


def _plan(conversation: Conversation, message: Message) -> Plan | None:
    """The prompt, the deferred results and the call states a run into ``conversation`` takes;
    None when it has nothing new. UnknownCallError (nothing stored) for a response whose call
    the session never made."""
    open_calls = conversation.open_calls()
    answers: dict[str, FunctionResponse] = {}
    late: list[FunctionResponse] = []
    states: dict[str, CallState] = {}
    for response in message.function_responses:
        call = conversation.calls.get(response.id)
        if call is None:
            raise UnknownCallError(
                f"the pydantic-ai session has no long-running call {response.id!r}"
            )
        if call.state == "answered":
            continue
        # The model must see the response under the name it called.
        named = FunctionResponse(call.call_id, call.tool_name, response.response)
        if call.state == "open":
            answers[call.call_id] = named
        else:
            late.append(named)
        states[call.call_id] = "answered" if is_final(response.response) else "noted"
    if message.text is None and not answers and not late:
        return None
    results: dict[str, Any] = {}
    for call in open_calls:
        answer = answers.get(call.call_id)
        results[call.call_id] = pending_note(call) if answer is None else answer.response
        states.setdefault(call.call_id, "noted")
    prompt = message.text
    if late:
        prompt = "\n".join(late_note(r) for r in late)
    return prompt, results, states


def _opened(output: Any, new: Sequence[ModelMessage]) -> list[OpenedCall]:
    """The calls a run left deferred, with the run id of the response that made them."""
    if not isinstance(output, DeferredToolRequests):
        return []
    if output.approvals:
        raise AgentError(
            "the agent asked for tool approvals; longcall's pydantic-ai runner resumes "
            "long-running calls (CallDeferred) only"
        )
    runs = {
        part.tool_call_id: m.run_id
        for m in new
        if isinstance(m, ModelResponse)
        for part in m.parts
        if isinstance(part, ToolCallPart)
    }
    return [
        OpenedCall(
            call.tool_call_id,
            call.tool_name,
            runs.get(call.tool_call_id),
            output.metadata.get(call.tool_call_id, {}).get("jobId"),
        )
        for call in output.calls
    ]


def _output_types(agent: Agent[Any, Any]) -> list[Any]:
    declared = agent.output_type
    return list(declared) if isinstance(declared, Sequence) else [declared]
