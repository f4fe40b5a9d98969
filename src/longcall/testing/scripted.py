"""A scripted agent: deterministic, offline, with durable sessions in longcall's own store.

It stands in for a model in the demo and in tests, and speaks the same events a framework
would: a user asks, it calls the tool a rule names, answers the pending map, and answers each
function response delivered later. Like google-adk it refuses a response to a call the session
does not hold (before storing anything) and never mixes two invocations in one message.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from longcall.agents import AgentEvent, Fence, FunctionCall, FunctionResponse, Message
from longcall.core.jobs import STILL_WORKING, CallIds, status_word
from longcall.errors import AgentError, UnknownCallError
from longcall.testing.transcripts import Transcripts

if TYPE_CHECKING:
    from longcall.app import App
    from longcall.jobs.tools import LongRunningTool

ArgsFrom = Mapping[str, Any] | Callable[["re.Match[str]"], Mapping[str, Any]]
FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled", "completed"})


@dataclass(frozen=True, slots=True)
class Rule:
    """When a user's text matches ``pattern`` (a case-insensitive regex): call tools, or reply."""

    pattern: str
    calls: Sequence[tuple[str, ArgsFrom]] = ()
    reply: str | None = None

    def match(self, text: str) -> re.Match[str] | None:
        return re.search(self.pattern, text, re.IGNORECASE)


# The status words a function response may carry beside STILL_WORKING, longcall's and those
# of ADK's own samples and docs ("approved", "SUCCESS", ...), compared as status_word spells them.
FINISHED = frozenset({"succeeded", "completed", "complete", "done", "success", "ok", "finished"})
APPROVED = frozenset({"approved", "accepted"})
REJECTED = frozenset({"rejected", "denied", "declined"})
FAILED = frozenset({"failed", "failure"})
EXPIRED = frozenset({"expired", "timeout", "timed_out"})
CANCELLED = frozenset({"cancelled", "canceled"})
# Keys every reply already says in its own words; the rest are details worth repeating.
_SAID = frozenset({"status", "jobId", "message", "progress", "result", "error"})


def default_reply(response: FunctionResponse) -> str:
    """What the scripted model says about one function response.

    It knows longcall's statuses and the words ADK's samples use (``pending``,
    ``in-progress``, ``approved``, ``rejected``, ``completed``, ``SUCCESS``, ...); any other
    status is repeated as it is, with the response's details, never taken for a failure.
    """
    body = response.response
    name = response.name
    raw = body.get("status")
    status = status_word(raw) if raw is not None else None
    details = _details(body)
    if status == "pending":
        said = f" {body['message']}" if body.get("message") else ""
        extra = f" ({details})" if details else ""
        return f"I've started {name}.{said}{extra} I'll let you know when it's done."
    if status == "error":
        return f"I couldn't run {name}: {body.get('message', 'unknown error')}"
    if status in STILL_WORKING:
        now = body.get("progress") or body.get("message") or details
        return f"{name} is still running: {_describe(now)}." if now else f"{name} is still running."
    if status in FINISHED:
        what = body.get("result") if "result" in body else (body.get("message") or details)
        return f"{name} has finished: {_describe(what)}." if what else f"{name} has finished."
    if status in APPROVED:
        return _with(f"{name} was approved", body.get("message") or details)
    if status in REJECTED:
        return _with(f"{name} was rejected", body.get("message") or details)
    if status in EXPIRED:
        return (
            f"Sorry, {name} did not finish in time ({body.get('message', 'expired')}). "
            "Shall I start it again?"
        )
    if status in CANCELLED:
        return f"{name} was cancelled."
    if status in FAILED:
        return f"{name} failed: {body.get('error') or body.get('message') or body}."
    if status is None:
        return f"{name} answered: {_describe(body)}." if body else f"{name} answered."
    return _with(f"{name} reports status {raw!r}", body.get("message") or details)


def _with(head: str, detail: Any) -> str:
    return f"{head}: {_describe(detail)}." if detail else f"{head}."


def _details(body: Mapping[str, Any]) -> str:
    """The response's own fields beyond those every reply speaks of (a ticket id, an amount)."""
    return _describe({k: v for k, v in body.items() if k not in _SAID})


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def _content(event: AgentEvent) -> dict[str, Any]:
    return {
        "text": event.text,
        "functionCalls": [
            {"id": c.id, "name": c.name, "args": c.args} for c in event.function_calls
        ],
        "functionResponses": [
            {"id": r.id, "name": r.name, "response": r.response} for r in event.function_responses
        ],
        "longRunningIds": sorted(event.long_running_ids),
    }


def event_from_content(author: str, invocation_id: str, content: Mapping[str, Any]) -> AgentEvent:
    """Rebuild an event stored by the scripted agent."""
    return AgentEvent(
        author=author,
        invocation_id=invocation_id,
        text=content.get("text"),
        function_calls=tuple(
            FunctionCall(c["id"], c["name"], c["args"]) for c in content.get("functionCalls", ())
        ),
        function_responses=tuple(
            FunctionResponse(r["id"], r["name"], r["response"])
            for r in content.get("functionResponses", ())
        ),
        long_running_ids=frozenset(content.get("longRunningIds", ())),
    )


def stored_transcript(app: App, *, session_id: str, user_id: str) -> list[AgentEvent]:
    """The scripted agent's session ``session_id`` of ``user_id`` as kept in ``app``'s
    database (empty for another user's): for showing it without the agent at hand."""
    stored = Transcripts(app.store).events(session_id, user_id=user_id)
    return [event_from_content(e.author, e.invocation_id, e.content) for e in stored]


@dataclass
class ScriptedAgent:
    """An :class:`~longcall.agents.AgentRunner` that follows rules instead of a model.

    ``record_join`` hands the tool the whole join (session, call and invocation id) at
    creation, as google-adk's tool context does; without it the tool sees no ids and a
    :class:`~longcall.agents.CallObserver` must attach them from the events.
    ``think`` is awaited before each model reply: tests use it to make a turn slow.
    """

    app: App
    rules: Sequence[Rule] = ()
    app_name: str = "longcall-demo"
    name: str = "assistant"
    fallback: str = "I can help with the tasks I have tools for."
    record_join: bool = True
    replies: Callable[[FunctionResponse], str] = default_reply
    think: Callable[[], Awaitable[None]] | None = None
    tools: Mapping[str, LongRunningTool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.tools:
            self.tools = self.app.tools
        self.transcripts = Transcripts(self.app.store)

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        owner = await self.app.in_thread(
            self.transcripts.ensure_session, session_id, app_name=self.app_name, user_id=user_id
        )
        if owner != user_id:
            # Its sessions are keyed by session id alone: the first user keeps the id, and
            # another user's run never reads or writes that user's conversation.
            if message.text is None:
                raise UnknownCallError(
                    f"session {session_id!r} of user {user_id!r} holds no function call"
                )
            raise AgentError(f"the scripted agent's session {session_id!r} belongs to another user")
        if message.text is not None:
            async for event in self._answer_text(user_id, session_id, message.text):
                yield event
        else:
            async for event in self._answer_responses(
                session_id, message.function_responses, message.fence
            ):
                yield event

    async def _store(
        self,
        session_id: str,
        event: AgentEvent,
        final_to: str | None = None,
        fence: Fence | None = None,
    ) -> bool:
        # A delivery's fence is checked in the transaction that appends: no window at all.
        seqs = await self.app.in_thread(
            self.transcripts.append,
            session_id,
            [(event.invocation_id, event.author, _content(event), final_to)],
            fence=None if fence is None else (fence.session, fence.holder, fence.token),
        )
        return seqs[0] is not None

    async def _say(
        self, session_id: str, invocation_id: str, text: str, fence: Fence | None = None
    ) -> AgentEvent:
        if self.think is not None:
            await self.think()
        event = AgentEvent(author=self.name, invocation_id=invocation_id, text=text)
        await self._store(session_id, event, fence=fence)
        return event

    async def _answer_text(
        self, user_id: str, session_id: str, text: str
    ) -> AsyncIterator[AgentEvent]:
        invocation_id = f"inv-{uuid.uuid4().hex[:12]}"
        user_event = AgentEvent(author="user", invocation_id=invocation_id, text=text)
        await self._store(session_id, user_event)
        yield user_event
        rule = next((r for r in self.rules if r.match(text)), None)
        if rule is None or not rule.calls:
            yield await self._say(
                session_id, invocation_id, rule.reply if rule and rule.reply else self.fallback
            )
            return
        match = rule.match(text)
        assert match is not None
        calls = tuple(
            FunctionCall(
                f"call-{uuid.uuid4().hex[:12]}", name, dict(args(match) if callable(args) else args)
            )
            for name, args in rule.calls
        )
        if self.think is not None:
            await self.think()
        call_event = AgentEvent(
            author=self.name,
            invocation_id=invocation_id,
            function_calls=calls,
            long_running_ids=frozenset(c.id for c in calls if c.name in self.tools),
        )
        await self._store(session_id, call_event)
        yield call_event
        responses = []
        for call in calls:
            tool = self.tools.get(call.name)
            if tool is None:
                body: dict[str, Any] = {"status": "error", "message": f"no tool named {call.name}"}
            else:
                ids = CallIds(self.app_name, user_id, session_id, call.id, invocation_id)
                body = await tool.invoke_async(call.args, ids if self.record_join else None)
            responses.append(FunctionResponse(call.id, call.name, body))
        response_event = AgentEvent(
            author=self.name, invocation_id=invocation_id, function_responses=tuple(responses)
        )
        await self._store(session_id, response_event)
        yield response_event
        reply = " ".join(self.replies(r) for r in responses)
        yield await self._say(session_id, invocation_id, reply)

    async def _invocation_of_calls(self, session_id: str) -> dict[str, str]:
        events = await self.app.in_thread(self.transcripts.events, session_id)
        return {
            call["id"]: e.invocation_id
            for e in events
            for call in e.content.get("functionCalls", ())
        }

    async def _answer_responses(
        self, session_id: str, responses: Sequence[FunctionResponse], fence: Fence | None
    ) -> AsyncIterator[AgentEvent]:
        owners = await self._invocation_of_calls(session_id)
        unknown = [r.id for r in responses if r.id not in owners]
        if unknown:
            raise UnknownCallError(f"session {session_id!r} has no function call {unknown[0]!r}")
        invocations = {owners[r.id] for r in responses}
        if len(invocations) > 1:
            raise ValueError("function responses to calls of different invocations in one message")
        invocation_id = invocations.pop()
        fresh = []
        for response in responses:
            final_to = response.id if response.response.get("status") in FINAL_STATUSES else None
            event = AgentEvent(
                author="user", invocation_id=invocation_id, function_responses=(response,)
            )
            if await self._store(session_id, event, final_to, fence):
                fresh.append(response)
                yield event
        if fresh:
            yield await self._say(
                session_id, invocation_id, " ".join(self.replies(r) for r in fresh), fence
            )

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        transcripts = self.transcripts
        if await self.app.in_thread(transcripts.owner, session_id) != user_id:
            return False
        return await self.app.in_thread(transcripts.has_final_response, session_id, call_id)

    async def history(self, session_id: str, *, user_id: str | None = None) -> list[AgentEvent]:
        """Every event of a session, in order; with ``user_id``, none unless it is theirs."""
        events = await self.app.in_thread(self.transcripts.events, session_id, user_id=user_id)
        return [event_from_content(e.author, e.invocation_id, e.content) for e in events]

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The user's session (:meth:`history`), as :class:`~longcall.agents.TranscriptSource`
        asks: another user's session of the same id reads as empty."""
        return await self.history(session_id, user_id=user_id)
