"""pydantic-ai messages in longcall's framework-neutral terms (events for the deliverer, the
CallObserver and the dashboard's transcript)."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from longcall.agents import AgentEvent, FunctionCall, FunctionResponse


def to_agent_event(
    message: ModelMessage, *, author: str, long_running: frozenset[str]
) -> AgentEvent:
    """A pydantic-ai message in longcall's framework-neutral terms."""
    invocation_id = message.run_id or ""
    if isinstance(message, ModelResponse):
        texts = [p.content for p in message.parts if isinstance(p, TextPart)]
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        return AgentEvent(
            author=author,
            invocation_id=invocation_id,
            text="".join(texts) or None,
            function_calls=tuple(
                FunctionCall(c.tool_call_id, c.tool_name, c.args_as_dict()) for c in calls
            ),
            long_running_ids=frozenset(c.tool_call_id for c in calls) & long_running,
        )
    prompts = [p.content for p in message.parts if isinstance(p, UserPromptPart)]
    returns = [p for p in message.parts if isinstance(p, ToolReturnPart)]
    return AgentEvent(
        author="user",
        invocation_id=invocation_id,
        text="\n".join(p if isinstance(p, str) else str(p) for p in prompts) or None,
        function_responses=tuple(
            FunctionResponse(
                r.tool_call_id,
                r.tool_name,
                _as_body(r.content),
            )
            for r in returns
        ),
    )


def _as_body(content: Any) -> dict[str, Any]:
    """A tool return's content as a function response body (a mapping, or under ``result``)."""
    return dict(content) if isinstance(content, dict) else {"result": content}
