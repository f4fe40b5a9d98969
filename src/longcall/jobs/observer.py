"""Joining jobs to their calls from a run's events, for frameworks whose tools cannot see
their own call id."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from longcall.agents import AgentEvent
from longcall.core.jobs import CallIds
from longcall.errors import AttachConflict, JobNotFound
from longcall.jobs._joins import Joins
from longcall.logs import about

log = logging.getLogger("longcall.agents")


class CallObserver:
    """Attaches session and call ids to jobs from a run's events.

    Long-running call ids are remembered from the call event; when the response to one of
    them carries a ``jobId`` (the pending map), that job is joined to the session and call.
    One observer serves one run; the durable record is the job row.
    """

    def __init__(
        self, joins: Joins, *, app_name: str | None, user_id: str, session_id: str
    ) -> None:
        self._joins = joins
        self._ids = CallIds(app_name=app_name, user_id=user_id, session_id=session_id)
        self._open: dict[str, str | None] = {}  # long-running call id -> invocation id
        self.attached: list[str] = []

    async def observe(self, event: AgentEvent) -> None:
        for call_id in event.long_running_ids:
            self._open[call_id] = event.invocation_id
        for response in event.function_responses:
            if response.id not in self._open:
                continue
            job_id = response.response.get("jobId")
            if not isinstance(job_id, str) or self._joins.is_joined(response.id):
                self._open.pop(response.id, None)
                continue
            ids = CallIds(
                self._ids.app_name,
                self._ids.user_id,
                self._ids.session_id,
                response.id,
                self._open.pop(response.id),
            )
            try:
                await self._joins.attach_async(job_id, ids)
                self.attached.append(job_id)
            except (AttachConflict, JobNotFound) as exc:
                log.warning(
                    "could not attach job %s to call %s: %s",
                    job_id,
                    response.id,
                    exc,
                    extra=about(job_id=job_id, session_id=self._ids.session_id),
                )

    async def observe_all(self, events: Iterable[AgentEvent]) -> None:
        for event in events:
            await self.observe(event)
