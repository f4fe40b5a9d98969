"""The SDK's conversation items in longcall's framework-neutral terms."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agents.items import RunItem, ToolApprovalItem

from longcall.agents import AgentEvent, FunctionCall, FunctionResponse


def response_body(output: Any) -> dict[str, Any]:
    """A tool output as a function response's body: its JSON object, else ``{"output": …}``."""
    if isinstance(output, str):
        try:
            parsed = json.loads(output)
        except ValueError:
            return {"output": output}
        return parsed if isinstance(parsed, dict) else {"output": parsed}
    if isinstance(output, Mapping):
        return dict(output)
    return {"output": output}


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content or None
    texts = [
        part.get("text", "")
        for part in content or ()
        if isinstance(part, Mapping) and part.get("type") in ("output_text", "input_text")
    ]
    return "".join(texts) or None


def item_event(
    item: Mapping[str, Any], *, author: str, invocation_id: str, names: Mapping[str, str]
) -> AgentEvent | None:
    """One input item (as the SDK's sessions keep them) as an event, or None for an item
    longcall has no word for (reasoning, other tools' calls). ``names``: call id -> tool name,
    for the outputs (which carry only the call id)."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        return AgentEvent(
            author="user" if role == "user" else author,
            invocation_id=invocation_id,
            text=_text(item.get("content")),
        )
    if kind == "function_call":
        args = response_body(item.get("arguments") or "{}")
        call = FunctionCall(str(item.get("call_id")), str(item.get("name")), args)
        return AgentEvent(author=author, invocation_id=invocation_id, function_calls=(call,))
    if kind == "function_call_output":
        call_id = str(item.get("call_id"))
        response = FunctionResponse(
            call_id, names.get(call_id, ""), response_body(item.get("output"))
        )
        return AgentEvent(
            author=author, invocation_id=invocation_id, function_responses=(response,)
        )
    return None


def call_names(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Call id -> tool name, for every function call among ``items``."""
    return {
        str(i["call_id"]): str(i.get("name"))
        for i in items
        if i.get("type") == "function_call" and i.get("call_id")
    }


def items_events(
    items: Iterable[Mapping[str, Any]],
    *,
    author: str,
    invocation_id: str,
    called: Mapping[str, str] | None = None,
) -> list[AgentEvent]:
    """Input items (a session's, or a run's new ones) as events, in order. ``called``: the
    tool names of calls made before ``items`` (call id -> name) that outputs among them answer."""
    listed = list(items)
    names = {**(called or {}), **call_names(listed)}
    events = (
        item_event(i, author=author, invocation_id=invocation_id, names=names) for i in listed
    )
    return [e for e in events if e is not None]


def run_items(items: Iterable[RunItem]) -> list[dict[str, Any]]:
    """A run's new items as input items; approval placeholders are left out (the runner
    reports a paused call itself, with its pending map)."""
    converted = []
    for item in items:
        if isinstance(item, ToolApprovalItem):
            continue
        converted.append(dict(item.to_input_item()))
    return converted


def paused_call_event(
    item: ToolApprovalItem, pending: Mapping[str, Any], *, author: str, invocation_id: str
) -> AgentEvent:
    """A call the run paused on, answered (for longcall's observers) with its pending map."""
    call_id = str(item.call_id)
    name = str(item.name)
    return AgentEvent(
        author=author,
        invocation_id=invocation_id,
        function_calls=(FunctionCall(call_id, name, response_body(item.arguments or "{}")),),
        function_responses=(FunctionResponse(call_id, name, dict(pending)),),
        long_running_ids=frozenset({call_id}),
    )
