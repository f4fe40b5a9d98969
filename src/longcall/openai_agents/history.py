"""A conversation's history as a model may read it: every call right before its output.

A user may talk while a long-running call is open. The SDK's session then holds the call,
the user's turn, and (once the job ended) the call's output after that turn. The Responses
API reads such a history, but Chat Completions models need each tool output right after the
assistant message that called the tool. :func:`calls_beside_outputs` moves each such call
to just before its output, so any model reads a valid history: the turns in between come
first, then the call and its result, as if it had been called when its result came.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents.memory.util import SessionInputCallback

_CALL_OR_OUTPUT = frozenset({"function_call", "function_call_output"})


def _kind(item: Any) -> str | None:
    return item.get("type") if isinstance(item, dict) else None


def calls_beside_outputs(items: Sequence[Any]) -> list[Any]:
    """``items`` with each function call that has other items (a user's turn) between it and
    its output moved to right before that output; everything else keeps its order."""
    outputs = {
        item.get("call_id"): index
        for index, item in enumerate(items)
        if _kind(item) == "function_call_output"
    }
    moved: dict[Any, Any] = {}
    for index, item in enumerate(items):
        if _kind(item) != "function_call":
            continue
        output_at = outputs.get(item.get("call_id"))
        if output_at is None or output_at < index:
            continue
        between = items[index + 1 : output_at]
        if any(_kind(other) not in _CALL_OR_OUTPUT for other in between):
            moved[item.get("call_id")] = item
    if not moved:
        return list(items)
    ordered: list[Any] = []
    for item in items:
        call_id = item.get("call_id") if isinstance(item, dict) else None
        if _kind(item) == "function_call" and call_id in moved:
            continue
        if _kind(item) == "function_call_output" and call_id in moved:
            ordered.append(moved[call_id])
        ordered.append(item)
    return ordered


def history_in_call_order(then: SessionInputCallback | None = None) -> SessionInputCallback:
    """A ``RunConfig.session_input_callback``: the history with :func:`calls_beside_outputs`
    applied, then the new input (or ``then``'s combination of the two, a user's own)."""

    async def combine(history: list[Any], new_input: list[Any]) -> list[Any]:
        ordered = calls_beside_outputs(history)
        if then is None:
            return [*ordered, *new_input]
        combined = then(ordered, new_input)
        if isinstance(combined, Awaitable):
            combined = await combined
        return list(combined)

    callback: Callable[[list[Any], list[Any]], Awaitable[list[Any]]] = combine
    return callback
