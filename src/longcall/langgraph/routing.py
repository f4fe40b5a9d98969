"""Routing tool calls so that each long-running call waits in an interrupt of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.types import Send

from longcall.langgraph._protocol import state_messages


def send_each_tool_call(
    node: str = "tools", *, messages_key: str = "messages"
) -> Callable[[Any], list[Send] | str]:
    """A conditional edge that sends each tool call of the last model message to ``node``
    (a ``ToolNode``) as its own task, or ends the graph when there is none::

        builder.add_conditional_edges("agent", send_each_tool_call("tools"), ["tools", END])

    Each long-running call then waits in its own interrupt, so calls made together run in
    parallel and their results are told apart.
    """

    def route(state: Any) -> list[Send] | str:
        messages = state_messages(state, messages_key)
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        return [
            Send(
                node,
                {"__type": "tool_call_with_context", "tool_call": call, "state": state},
            )
            for call in last.tool_calls
        ]

    return route
