"""``LongcallPlugin``: serialises every ADK run on a session with longcall's resumes.

Added to a ``Runner`` (or to ``adk web`` / ``adk api_server`` with ``--extra_plugins
longcall.adk.LongcallPlugin``, configured by ``LONGCALL_DATABASE_URL``), it takes the
session's lease before the user's message is stored, so a user turn and a resume never
overlap, in one process or across processes, and releases it when the run ends. It also
attaches long-running calls seen on events to their jobs, for tools that are not longcall
tools but answer with a ``jobId``. It never raises into the user's run (ADK would fail the
run): it logs and carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from longcall.adk.runner import RESUMING, to_agent_event
from longcall.agents import CallObserver
from longcall.app import App, new_holder_id
from longcall.jobs import SessionKey

log = logging.getLogger("longcall.adk")


@dataclass
class _Held:
    session: SessionKey
    holder: str
    renewer: asyncio.Task[None] | None = None
    observer: CallObserver | None = None
    owner: asyncio.Task[Any] | None = None  # the task running the turn
    extra: dict[str, Any] = field(default_factory=dict)


class LongcallPlugin(BasePlugin):
    """Session leases around ADK runs, and long-running call ids recorded from events.

    ``app``: the longcall App; by default one on ``$LONGCALL_DATABASE_URL`` (what
    ``--extra_plugins`` needs). ``wait_limit``: how long a user turn waits for a resume in
    progress before it goes ahead anyway (with a warning) rather than hang.
    """

    def __init__(
        self, app: App | None = None, *, name: str = "longcall", wait_limit: float = 300.0
    ) -> None:
        super().__init__(name)
        self._app = app
        self.wait_limit = wait_limit
        # Keyed by the invocation context itself: ADK may change its invocation id after
        # on_user_message_callback (a function response joins the invocation it answers).
        self._held: dict[int, _Held] = {}

    @property
    def app(self) -> App:
        if self._app is None:
            url = os.environ.get("LONGCALL_DATABASE_URL")
            if not url:
                log.warning("LONGCALL_DATABASE_URL is not set; using sqlite:///longcall.db")
            self._app = App(url)
        return self._app

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        try:
            await self._take(invocation_context)
        except Exception:
            log.exception("longcall could not take the session lease; the run goes on")
        return None

    async def _take(self, ic: InvocationContext) -> None:
        session = ic.session
        # ADK's session is the app's and the user's: so is its lease, the one deliveries of
        # that app's jobs into it take (another app's session of the same id is not it).
        held = _Held(SessionKey(session.app_name, session.user_id, session.id), "")
        held.observer = CallObserver(
            self.app, app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        self._held[id(ic)] = held
        if RESUMING.get():
            return  # the deliverer holds the lease for this run already
        app = self.app
        holder = new_holder_id("adk-turn")
        waited, delay = 0.0, 0.005
        while not await app.in_thread(
            app.store.take_session, held.session, holder, kind="turn", ttl=app.session_lease
        ):
            if waited >= self.wait_limit:
                log.warning(
                    "session %s stayed busy for %.0fs; running anyway", held.session, waited
                )
                return
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.25)
        held.holder = holder
        held.owner = asyncio.current_task()
        held.renewer = asyncio.create_task(self._renew(id(ic), held))
        if waited:
            await self._refresh(ic)

    async def _refresh(self, ic: InvocationContext) -> None:
        """Reload the session ADK loaded before the wait, so its next append is not stale."""
        session = ic.session
        fresh = await ic.session_service.get_session(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        if fresh is None:
            return
        session.events[:] = fresh.events
        session.state.clear()
        session.state.update(fresh.state)
        session.last_update_time = fresh.last_update_time
        if hasattr(fresh, "_storage_update_marker"):
            session._storage_update_marker = fresh._storage_update_marker

    async def _renew(self, key: int, held: _Held) -> None:
        app = self.app
        while True:
            if held.owner is None:
                await asyncio.sleep(app.session_lease / 3)
            else:
                await asyncio.wait({held.owner}, timeout=app.session_lease / 3)
                if held.owner.done():
                    # A cancelled run gets neither after_run nor on_run_error from ADK: once
                    # the task that ran the turn is gone, so is the turn; give the lease back.
                    if self._held.get(key) is held:
                        del self._held[key]
                    held.renewer = None
                    await self._give_back(held)
                    return
            try:
                if not await app.in_thread(
                    app.store.renew_session, held.session, held.holder, ttl=app.session_lease
                ):
                    log.error("a user turn on session %s outlived its lease", held.session)
            except Exception:
                log.exception("could not renew the lease on session %s", held.session)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        try:
            held = self._held.get(id(invocation_context))
            if held is not None and held.observer is not None:
                await held.observer.observe(to_agent_event(event))
        except Exception:
            log.exception("longcall could not record the calls of an event")
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        await self._release(invocation_context)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: BaseException
    ) -> None:
        await self._release(invocation_context)

    async def _release(self, ic: InvocationContext) -> None:
        held = self._held.pop(id(ic), None)
        if held is None or not held.holder:
            return
        if held.renewer is not None:
            held.renewer.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await held.renewer
        await self._give_back(held)

    async def _give_back(self, held: _Held) -> None:
        try:
            await self.app.in_thread(self.app.store.release_session, held.session, held.holder)
        except Exception:
            log.exception("longcall could not release session %s", held.session)
