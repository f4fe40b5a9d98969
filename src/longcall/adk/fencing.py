"""Fenced appends for google-adk: a delivery that lost its session writes nothing into it.

ADK's session stores keep no unique index per function call, so a deliverer that stalled past
its lease (a frozen process, a long pause, a partition) and woke after another had delivered
would append the closing response, or the model's answer to it, a second time.
:class:`FencedSessionService` wraps the runner's own session service: while a delivery runs
(:data:`DELIVERY_FENCE` holds its fence), every ``append_event`` first asks longcall's job
table whether the delivery still holds the session under its fence, and raises
:class:`~longcall.errors.FenceLost` instead of appending when it does not. Outside a delivery
(a user's turn) it only passes calls through.

What remains is the time between that check and ADK's own commit (the ADK session is in
another database, so the two cannot share a transaction): a holder frozen exactly there, for
longer than its lease, could still append once. ``tests/adk/test_fencing.py`` measures it.
"""

from __future__ import annotations

import contextvars
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from longcall.agents import Fence

# The fence of the delivery running in this context, if any (set by AdkAgentRunner.run).
DELIVERY_FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar(
    "longcall_delivery_fence", default=None
)


class FencedSessionService(BaseSessionService):
    """ADK's session service, checking a delivery's fence before each append."""

    def __init__(self, inner: BaseSessionService) -> None:
        self.inner = inner

    async def append_event(self, session: Session, event: Event) -> Event:
        fence = DELIVERY_FENCE.get()
        if fence is not None and not event.partial:
            await fence.check_async()
        return await self.inner.append_event(session, event)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await self.inner.create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await self.inner.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        return await self.inner.list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await self.inner.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self.inner.get_user_state(app_name=app_name, user_id=user_id)

    async def flush(self) -> None:
        await self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        # Anything else a particular service offers (close, engines, …) is the inner one's.
        return getattr(self.inner, name)


def fence_appends(runner: Any) -> None:
    """Wrap ``runner``'s session service (once) so deliveries check their fence."""
    if not isinstance(runner.session_service, FencedSessionService):
        runner.session_service = FencedSessionService(runner.session_service)
