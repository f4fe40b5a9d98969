"""The SDK session a delivery writes through: every write checks the delivery's fence first."""

from __future__ import annotations

from typing import Any

from agents.memory import Session
from agents.memory.session_settings import SessionSettings

from longcall.agents import Fence


class FencedSession:
    """A ``Session`` that forwards to ``inner`` and checks ``fence`` right before each write,
    so a delivery whose holder lost the session's lease writes nothing more into it
    (:class:`~longcall.errors.FenceLost` instead)."""

    def __init__(self, inner: Session, fence: Fence) -> None:
        self.inner = inner
        self.fence = fence
        self.session_id = inner.session_id
        self.session_settings: SessionSettings | None = inner.session_settings

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await self.inner.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        await self.fence.check_async()
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        await self.fence.check_async()
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.fence.check_async()
        await self.inner.clear_session()


async def answered_calls(session: Session) -> set[str]:
    """The call ids the session holds an output for."""
    return {
        str(item.get("call_id"))
        for item in await session.get_items()
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
