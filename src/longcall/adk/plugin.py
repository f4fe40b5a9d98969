"""``LongcallPlugin``: serialises every ADK run on a session with longcall's resumes.

Added to a ``Runner`` (or to ``adk web`` / ``adk api_server`` with ``--extra_plugins
longcall.adk.LongcallPlugin``, configured by ``LONGCALL_DATABASE_URL``), it takes the
session's lease before the user's message is stored, so a user turn and a resume never
overlap, in one process or across processes, and releases it when the run ends (without
holding up the end of the run: the next turn on the session in this process waits for the
release, other processes see the lease free a moment later). A run whose message answers
only calls that the live delivery holding the lease claimed is that delivery, posted to this
ADK server by a worker elsewhere (``AdkServerRunner``): it runs under the deliverer's lease
instead of waiting for it. It also attaches long-running calls seen on events to their jobs,
for tools that are not longcall tools but answer with a ``jobId``. It never raises into the
user's run (ADK would fail the run): it logs and carries on.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from longcall.adk.runner import RESUMING, to_agent_event
from longcall.app import App
from longcall.core.jobs import SessionKey
from longcall.jobs.observer import CallObserver
from longcall.runtime import new_holder_id

log = logging.getLogger("longcall.adk")


@dataclass
class _Held:
    session: SessionKey
    holder: str
    observer: CallObserver | None = None
    owner: asyncio.Task[Any] | None = None  # the task running the turn
    on_owner_done: Callable[[asyncio.Task[Any]], None] | None = None


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
        # Releases started by ended runs and not yet committed, by session.
        self._releasing: dict[SessionKey, asyncio.Future[None]] = {}
        # One heartbeat for every lease the turns of this plugin hold (None while none is).
        self._heartbeat: tuple[asyncio.AbstractEventLoop, asyncio.TimerHandle] | None = None
        self._renewals: set[asyncio.Future[None]] = set()

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
            await self._take(invocation_context, answers_of(user_message))
        except Exception:
            log.exception("longcall could not take the session lease; the run goes on")
        return None

    async def _take(self, ic: InvocationContext, answers: frozenset[str]) -> None:
        """Take the session's lease for this run, waiting while someone else holds it.

        ``answers`` (the call ids, when the message is function responses alone): a run
        that answers only calls a live delivery claimed is that delivery, sent through this
        process's ADK server by a deliverer elsewhere (``AdkServerRunner``); it runs under
        the deliverer's lease instead of waiting for it.
        """
        session = ic.session
        # ADK's session is the app's and the user's: so is its lease, the one deliveries of
        # that app's jobs into it take (another app's session of the same id is not it).
        held = _Held(SessionKey(session.app_name, session.user_id, session.id), "")
        held.observer = self.app.call_observer(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        self._held[id(ic)] = held
        if RESUMING.get():
            return  # the deliverer holds the lease for this run already
        releasing = self._releasing.get(held.session)
        if releasing is not None and releasing.get_loop() is asyncio.get_running_loop():
            await asyncio.wait({releasing})  # the session's last turn here is giving it back
        holder = new_holder_id("adk-turn")
        taken = await self.app.jobs.turns.take(
            held.session, holder, answers=answers, wait_limit=self.wait_limit
        )
        if taken.outcome is None:
            log.warning(
                "session %s stayed busy for %.0fs; running anyway", held.session, taken.waited
            )
            return
        if taken.outcome == "taken":
            held.holder = holder
            self._watch_owner(id(ic), held)
            self._keep_renewing()
        # else joined: the deliverer holds the lease, renews and releases it.
        if taken.waited:
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

    def _watch_owner(self, key: int, held: _Held) -> None:
        """Give the lease back if the task running the turn ends without ``after_run``.

        A cancelled run gets neither ``after_run_callback`` nor ``on_run_error_callback``
        from ADK: once the task that ran the turn is gone, so is the turn.
        """
        held.owner = asyncio.current_task()
        if held.owner is None:
            return

        def owner_done(_: asyncio.Task[Any]) -> None:
            if self._held.get(key) is held:
                del self._held[key]
                self._release_soon(held)

        held.on_owner_done = owner_done
        held.owner.add_done_callback(owner_done)

    def _keep_renewing(self) -> None:
        """Renew every lease a turn holds each third of the lease, while one is held."""
        loop = asyncio.get_running_loop()
        if self._heartbeat is not None and self._heartbeat[0] is loop:
            return  # (one left on a loop that since closed never fires: replace it)
        self._heartbeat = loop, loop.call_later(self.app.session_lease / 3, self._beat)

    def _beat(self) -> None:
        self._heartbeat = None
        held = [h for h in self._held.values() if h.holder]
        if held:
            self._renewals.add(task := asyncio.ensure_future(self._renew(held)))
            task.add_done_callback(self._renewals.discard)
            self._keep_renewing()

    async def _renew(self, held: list[_Held]) -> None:
        try:
            leases = [(h.session, h.holder) for h in held]
            kept = await self.app.in_thread(self.app.jobs.turns.renew, leases)
        except Exception:
            log.exception("could not renew longcall session leases")
            return
        for h, ok in zip(held, kept, strict=True):
            if not ok:
                log.error("a user turn on session %s outlived its lease", h.session)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        if not event.long_running_tool_ids and not event.get_function_responses():
            return None  # nothing the observer looks at
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
        if held.owner is not None and held.on_owner_done is not None:
            held.owner.remove_done_callback(held.on_owner_done)
        # A renewal under way matches this holder only until the release commits.
        self._release_soon(held)

    def _release_soon(self, held: _Held) -> None:
        """Start giving the lease back; the run ends without waiting for the commit."""
        future = self.app.start_in_thread(self.app.jobs.turns.release, held.session, held.holder)
        self._releasing[held.session] = future

        def released(done: asyncio.Future[None]) -> None:
            if self._releasing.get(held.session) is done:
                del self._releasing[held.session]
            if not done.cancelled() and done.exception() is not None:
                log.error(
                    "longcall could not release session %s: %r", held.session, done.exception()
                )

        future.add_done_callback(released)

    async def settled(self) -> None:
        """Wait until every release this plugin started has committed."""
        loop = asyncio.get_running_loop()
        while pending := {f for f in self._releasing.values() if f.get_loop() is loop}:
            await asyncio.wait(pending)
            await asyncio.sleep(0)  # their done-callbacks forget them

    async def close(self) -> None:
        """Called by ``Runner.close()``: let the last releases commit."""
        await self.settled()


def answers_of(message: types.Content) -> frozenset[str]:
    """The call ids ``message`` answers when it is function responses alone, each with its
    call id; empty for anything else (text, a mix, a response without an id).

    Not their names: a deliverer sends each response under the name of the call it answers,
    which for a job inside an ``AgentTool`` is not the job's tool.
    """
    answers: set[str] = set()
    for part in message.parts or ():
        response = part.function_response
        if response is None or not response.id or part.text is not None:
            return frozenset()
        answers.add(response.id)
    return frozenset(answers)
