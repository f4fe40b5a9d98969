"""The SDK session a run writes through: each call's output stored once, and a delivery's
writes fenced.

The SDK stores a resumed call's output before it asks the model. When that model turn fails
the paused run is resumed again from its state, and the SDK writes the output again: the
session keeps the first (a longcall call has one output, its job's end) and drops the rest.
"""

from __future__ import annotations

from typing import Any

from agents.memory import Session
from agents.memory.session_settings import SessionSettings

from longcall.agents import Fence


class GuardedSession:
    """A ``Session`` that forwards to ``inner``, drops a function call output the session
    holds already (by call id), and checks ``fence`` (if any) right before each write, so a
    delivery whose holder lost the session's lease writes nothing more into it
    (:class:`~longcall.errors.FenceLost` instead)."""

    def __init__(self, inner: Session, fence: Fence | None = None) -> None:
        self.inner = inner
        self.fence = fence
        self.session_id = inner.session_id
        self.session_settings: SessionSettings | None = inner.session_settings

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await self.inner.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        if any(_output_of(i) for i in items):
            answered = await answered_calls(self.inner)
            items = [i for i in items if _output_of(i) not in answered]
        if not items:
            return
        await self._check()
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        await self._check()
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self._check()
        await self.inner.clear_session()

    async def _check(self) -> None:
        if self.fence is not None:
            await self.fence.check_async()


def _output_of(item: Any) -> str | None:
    """The call id a function call output answers; None for any other item."""
    if isinstance(item, dict) and item.get("type") == "function_call_output":
        return str(item.get("call_id"))
    return None


async def answered_calls(session: Session) -> set[str]:
    """The call ids the session holds an output for."""
    return {
        str(item.get("call_id"))
        for item in await session.get_items()
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
