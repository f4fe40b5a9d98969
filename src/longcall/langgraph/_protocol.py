"""What the tool and the runner agree on: the interrupt a call waits in, the value that
resumes it, and how a closing answer reads back from a ``ToolMessage``.

A long-running call waits in a LangGraph interrupt whose value is the pending map with one
more key, :data:`CALL_KEY` (the call's id and tool name), so the runner can tell longcall's
interrupts from a graph's own and find the one that waits for a given call. The runner
resumes it with the job's function response (``{"status": ..., "jobId": ..., ...}``); the
tool answers its call with a ``ToolMessage`` under the original call id and tool name whose
content is that response as JSON and whose ``artifact`` is the response itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from longcall.agents import AgentEvent, FunctionCall, FunctionResponse

CALL_KEY = "longcallCall"
FINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})


def interrupt_value(pending: Mapping[str, Any], *, call_id: str, tool_name: str) -> dict[str, Any]:
    """The value a long-running call's interrupt surfaces: the pending map and the call."""
    return {**pending, CALL_KEY: {"id": call_id, "name": tool_name}}


def waiting_call(value: Any) -> tuple[str, str] | None:
    """The (call id, tool name) an interrupt value waits for, if it is longcall's."""
    if not isinstance(value, Mapping):
        return None
    call = value.get(CALL_KEY)
    if not isinstance(call, Mapping):
        return None
    call_id, name = call.get("id"), call.get("name")
    if isinstance(call_id, str) and isinstance(name, str):
        return call_id, name
    return None


def response_body(message: ToolMessage) -> dict[str, Any]:
    """A ToolMessage's answer as a mapping: longcall's artifact, its JSON content, or the
    content as a message."""
    if isinstance(message.artifact, Mapping):
        return dict(message.artifact)
    content = message.content
    if isinstance(content, str):
        try:
            parsed = json.loads(content)
        except ValueError:
            return {"message": content}
        return dict(parsed) if isinstance(parsed, Mapping) else {"message": content}
    return {"message": str(content)}


def closes_call(message: Any, call_id: str) -> bool:
    """Whether ``message`` is a final (terminal) answer to ``call_id``."""
    return (
        isinstance(message, ToolMessage)
        and message.tool_call_id == call_id
        and response_body(message).get("status") in FINAL_STATUSES
    )


def state_messages(state: Any, key: str = "messages") -> list[Any]:
    """The messages a graph state (a dict or an object) holds under ``key``."""
    found = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    return list(found or [])


def pending_messages(writes: Sequence[Any] | None, channel: str) -> list[Any]:
    """The messages a checkpoint's pending writes put on ``channel`` (tasks that finished
    while others of their step still wait)."""
    found: list[Any] = []
    for write in writes or ():
        if len(write) < 3 or write[1] != channel:
            continue
        value = write[2]
        if isinstance(value, Mapping):
            continue
        found.extend(value if isinstance(value, list | tuple) else [value])
    return found


def message_text(message: BaseMessage) -> str | None:
    """A message's text (its text content blocks joined), or None."""
    content = message.content
    if isinstance(content, str):
        return content or None
    texts = [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in content
        if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
    ]
    return "".join(texts) or None


def to_agent_event(
    message: BaseMessage, *, invocation_id: str, waiting: frozenset[str]
) -> AgentEvent:
    """A LangChain message in longcall's framework-neutral terms. ``waiting``: the ids of
    the calls that wait in longcall's interrupts (marked long-running)."""
    if isinstance(message, AIMessage):
        calls = tuple(
            FunctionCall(c.get("id") or "", c["name"], dict(c.get("args") or {}))
            for c in message.tool_calls
        )
        return AgentEvent(
            author=message.name or "model",
            invocation_id=message.id or invocation_id,
            text=message_text(message),
            function_calls=calls,
            long_running_ids=frozenset(c.id for c in calls if c.id in waiting),
        )
    if isinstance(message, ToolMessage):
        response = FunctionResponse(
            message.tool_call_id, message.name or "", response_body(message)
        )
        return AgentEvent(
            author="tools", invocation_id=invocation_id, function_responses=(response,)
        )
    return AgentEvent(author=message.type, invocation_id=invocation_id, text=message_text(message))
