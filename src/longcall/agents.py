"""The agent side: one small protocol any framework can speak.

An :class:`AgentRunner` runs a message into a session and streams the events it produces;
the deliverer uses it to hand function responses back. These are plain types: the engines
use them, and nothing here depends on the rest of longcall but its errors and job types.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from longcall.core.jobs import SessionKey
from longcall.errors import FenceLost


@dataclass(frozen=True, slots=True)
class FunctionCall:
    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FunctionResponse:
    """A tool's answer to one call: ``id`` and ``name`` exactly as the call had them."""

    id: str
    name: str
    response: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fence:
    """The fencing token of a delivery: who holds the session's lease, under which take.

    Every take of a session's lease raises its token. A delivery whose holder stalled past
    its lease (a frozen process, a long pause, a partition) and was overtaken carries an older
    token than the session's: an agent store checks :meth:`check` (or, in the same
    transaction as its write, the holder and token) right before it appends to the session,
    and writes nothing once the fence is lost.
    """

    session: SessionKey
    holder: str
    token: int
    held: Callable[[], bool] = field(compare=False, repr=False)
    """Asks the job table whether the holder still holds the session under ``token``."""

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def check(self) -> None:
        """Raise :class:`~longcall.errors.FenceLost` unless the lease is still this one's."""
        if not self.held():
            raise FenceLost(self.session_id, self.holder, self.token)

    async def check_async(self) -> None:
        await asyncio.to_thread(self.check)


@dataclass(frozen=True, slots=True)
class Message:
    """What goes into a session: a user's text, or function responses (never both).

    A delivery's message carries its :class:`Fence`; a user's turn carries none.
    """

    text: str | None = None
    function_responses: tuple[FunctionResponse, ...] = ()
    fence: Fence | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.text is None) == (not self.function_responses):
            raise ValueError("a Message carries either text or function responses")


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """One event of a run, in the terms every framework shares."""

    author: str
    invocation_id: str
    text: str | None = None
    function_calls: tuple[FunctionCall, ...] = ()
    function_responses: tuple[FunctionResponse, ...] = ()
    long_running_ids: frozenset[str] = frozenset()


@runtime_checkable
class AgentRunner(Protocol):
    """What longcall needs from an agent framework."""

    app_name: str

    def run(self, *, user_id: str, session_id: str, message: Message) -> AsyncIterator[AgentEvent]:
        """Run ``message`` into the session; yield the events the run produces.

        Raise :class:`~longcall.errors.UnknownCallError` for a function response whose call
        the session does not hold, before anything is stored. When the message carries a
        :class:`Fence`, check it right before each write into the session and raise
        :class:`~longcall.errors.FenceLost` instead of writing once it is lost.
        """
        ...

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the session already holds the closing response to ``call_id``."""
        ...


@runtime_checkable
class TranscriptSource(Protocol):
    """An agent runner that can show a session's conversation (the dashboard's transcript)."""

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]: ...
