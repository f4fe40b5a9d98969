"""The jobs engine: the registered long-running tools, the delivery listeners and the
session turns of one process, on top of the :class:`~longcall.runtime.Runtime`.

The dispatcher, the deliverer and the call observer receive this object; the
:class:`~longcall.App` creates one and hands its operations through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from longcall.core.jobs import Job, SessionKey
from longcall.errors import ConfigError
from longcall.jobs._joins import Joins
from longcall.jobs.completions import Completions
from longcall.jobs.tools import JobHandle, LongRunningTool
from longcall.jobs.turns import SessionTurns
from longcall.logs import about
from longcall.runtime import Runtime, new_holder_id

log = logging.getLogger("longcall")


class Jobs:
    """The tool registry, the delivery listeners and the calls joined by this process."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.joins = Joins(runtime)
        self.turns = SessionTurns(runtime)
        self.completions = Completions(runtime)
        # By name: the dispatcher finds a queued job's body here.
        self.tools: dict[str, LongRunningTool] = {}
        # Called as (outcome, job) for each delivery the deliverer makes: "delivered",
        # "progress_delivered", "orphaned", "delivery_retried", ... (the server's metrics).
        self.delivery_listeners: list[Callable[[str, Job], None]] = []

    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None,
        key: str | None,
        deadline: str | float | None,
        on_cancel: Callable[[JobHandle], Any] | None,
        description: str | None,
        context_types: Sequence[type],
    ) -> LongRunningTool:
        """Register ``func`` as a long-running tool (see :meth:`longcall.App.long_running`)."""
        tool = LongRunningTool(
            self.runtime,
            self.joins,
            func,
            name=name,
            key=key,
            deadline=deadline,
            on_cancel=on_cancel,
            description=description,
            context_types=context_types,
        )
        if tool.name in self.tools:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self.tools[tool.name] = tool
        return tool

    @contextlib.asynccontextmanager
    async def session_turn(self, session: SessionKey, *, kind: str) -> AsyncIterator[str]:
        """Hold ``session``'s lease while the block runs (waiting for it first); yield the
        holder. See :meth:`longcall.App.session_turn`."""
        runtime = self.runtime
        holder = new_holder_id(kind)
        await self.turns.take(session, holder, kind=kind)
        renewer = asyncio.create_task(self._renew_session(session, holder, kind))
        try:
            yield holder
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await runtime.in_thread(self.turns.release, session, holder)

    async def _renew_session(self, session: SessionKey, holder: str, kind: str) -> None:
        runtime = self.runtime
        while True:
            await asyncio.sleep(runtime.session_lease / 3)
            try:
                [kept] = await runtime.in_thread(self.turns.renew, [(session, holder)])
            except Exception:
                log.exception(
                    "could not renew the lease on session %s", session, extra=about(session=session)
                )
                continue
            if not kept:
                log.error(
                    "the %s on session %s outlived its lease; a resume may overlap it",
                    kind,
                    session,
                    extra=about(session=session),
                )
