"""What this process knows of the calls it joined, and attaching ids to jobs.

A job created with its whole join (session and call id) needs nothing from a call observer:
this memory lets the observer leave those calls alone. It is bounded and per process; the
durable record is the job row.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from longcall.core.jobs import CallIds, Job
from longcall.errors import AttachConflict
from longcall.logs import about
from longcall.runtime import Runtime

log = logging.getLogger("longcall")

# How many joined call ids a process remembers.
JOINED_MEMORY = 10_000


class Joins:
    """The calls this process joined to their jobs, and the attach operations."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._joined_calls: OrderedDict[str, None] = OrderedDict()

    def joined(self, job: Job) -> None:
        """Remember that ``job`` was created with its session and call id."""
        if job.call_id is not None and job.session_id is not None:
            self.remember_joined(job.call_id)

    def remember_joined(self, call_id: str) -> None:
        """Remember that the job of ``call_id`` has its join: observers leave the call alone."""
        self._joined_calls[call_id] = None
        if len(self._joined_calls) > JOINED_MEMORY:
            self._joined_calls.popitem(last=False)

    def is_joined(self, call_id: str) -> bool:
        """Whether this process created the job of ``call_id`` with the whole join."""
        return call_id in self._joined_calls

    def attach_quietly(self, job: Job, ids: CallIds) -> Job:
        """Attach what is missing; a conflict is recorded on the job, logged, and not raised."""
        if not any(ids.as_dict().values()):
            return job
        try:
            return self.runtime.store.attach(job.job_id, ids)
        except AttachConflict as exc:
            log.warning("%s", exc, extra=about(job))
            return job

    async def attach_async(self, job_id: str, ids: CallIds) -> Job:
        """Join a job to its session and call; only empty columns are filled."""
        return await self.runtime.in_thread(self.runtime.store.attach, job_id, ids)
