"""Polls the remote MCP tasks that local jobs wait on, and answers each job when its task ends.

Run it beside the worker (``await RemoteTaskPoller(remote).run()``), in as many processes
as you like: each round claims the due rows (see :mod:`longcall.mcp.remote_table`), asks the remote
server for each task (``tasks/get``) and then either completes, fails or cancels the local
job with what the task ended with (the first terminal result wins, so a job answered
meanwhile by anything else stays as it is), or puts the row back for later. A task still
working is polled again after an exponential, capped wait that never undercuts the
server's ``pollIntervalMs``; a server that cannot be reached is retried the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from mcp.client import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from longcall.core.backoff import exponential, exponential_ceiling
from longcall.core.jobs import JobState
from longcall.errors import JobNotFound
from longcall.mcp.client import cancel_task, get_task, http_session
from longcall.mcp.remote import RemoteTasks
from longcall.mcp.remote_table import ClaimedTask

log = logging.getLogger("longcall.mcp.poller")

ENDED = ("completed", "failed", "cancelled")
# A local job that ended so: its remote task is cancelled (nobody waits for it any more).
GIVEN_UP = (JobState.CANCELLED, JobState.EXPIRED)


def task_result(task: dict[str, Any]) -> Any:
    """The value a completed task's ``CallToolResult`` carries: its structured content, else
    its text (one text block as it is, several joined)."""
    result = task.get("result") or {}
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    texts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
    return "\n".join(texts)


def failure_reason(task: dict[str, Any]) -> str:
    error = task.get("error") or {}
    if task.get("result", {}).get("isError"):
        return str(task_result(task)) or "the remote tool reported an error"
    return str(error.get("message") or task.get("statusMessage") or "the remote task failed")


class RemoteTaskPoller:
    """One polling loop over ``remote``'s table.

    ``base`` and ``cap`` bound the wait between polls of a working task (seconds);
    ``lease`` is how long a claimed row is kept from other pollers; ``batch`` how many rows
    one round claims; ``idle`` how long :meth:`run` sleeps after a round with nothing due.
    """

    def __init__(
        self,
        remote: RemoteTasks,
        *,
        base: float = 1.0,
        cap: float = 60.0,
        lease: float = 30.0,
        batch: int = 50,
        idle: float = 0.5,
    ) -> None:
        if not 0 < base <= cap or lease <= 0 or batch < 1 or idle <= 0:
            raise ValueError("need 0 < base <= cap, lease > 0, batch >= 1 and idle > 0")
        self.remote = remote
        self.app = remote.app
        self.base, self.cap, self.lease, self.batch, self.idle = base, cap, lease, batch, idle
        self.stats: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Poll until ``stop`` is set (or the task is cancelled)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            polled = await self.poll_once()
            if polled == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.idle)

    async def poll_once(self) -> int:
        """One round: claim the due rows, poll each; the number of rows handled."""
        claimed = await asyncio.to_thread(
            self.remote.table.claim, limit=self.batch, lease=self.lease
        )
        by_server: dict[str, list[ClaimedTask]] = {}
        for row in claimed:
            by_server.setdefault(row.server, []).append(row)
        for server, rows in by_server.items():
            await self._poll_server(server, rows)
        return len(claimed)

    @contextlib.asynccontextmanager
    async def _session(self, name: str) -> AsyncIterator[ClientSession]:
        server = self.remote.server(name)
        async with http_session(server.url, server.headers, http_timeout=server.timeout) as session:
            yield session

    async def _poll_server(self, server: str, rows: list[ClaimedTask]) -> None:
        waiting: list[tuple[ClaimedTask, JobState]] = []
        for row in rows:
            if row.answer is not None:
                await self._finish(row, row.answer)
            elif (state := await self._still_waiting(row)) is not None:
                waiting.append((row, state))
        if not waiting:
            return
        try:
            async with self._session(server) as session:
                for row, state in waiting:
                    await self._poll_task(session, row, state)
        except Exception as exc:  # the server is down or slow: try again later
            log.warning("remote MCP server %s could not be polled: %r", server, exc)
            for row, _ in waiting:
                await self._unreachable(row)

    async def _poll_task(self, session: ClientSession, row: ClaimedTask, state: JobState) -> None:
        if state in GIVEN_UP:
            await self._cancel_remote(session, row)
            return
        try:
            task = await get_task(session, row.task_id)
        except MCPError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            # The server does not know the task (pruned, or another user's): it never ends.
            await self._finish(row, {"status": "failed", "error": {"message": str(exc)}})
            return
        await self._handle(row, task)

    async def _local_state(self, row: ClaimedTask) -> JobState | None:
        try:
            return (await self.app.get_job_async(row.job_id)).state
        except JobNotFound:
            return None

    async def _still_waiting(self, row: ClaimedTask) -> JobState | None:
        """The local job's state if the remote task still matters to it: it waits, or it was
        cancelled or expired (its remote task is cancelled next). Otherwise (pruned, or
        answered by someone else) its row goes and None is returned."""
        state = await self._local_state(row)
        if state is JobState.STARTED or state in GIVEN_UP:
            return state
        await asyncio.to_thread(self.remote.table.delete, row.job_id)
        self._count("dropped")
        return None

    async def _cancel_remote(self, session: ClientSession, row: ClaimedTask) -> None:
        try:
            await cancel_task(session, row.task_id)
        except MCPError as exc:  # gone already: nothing left to stop
            log.info("remote task %s of job %s not cancelled: %s", row.task_id, row.job_id, exc)
        await asyncio.to_thread(self.remote.table.delete, row.job_id)
        self._count("cancelled_remote")

    async def _handle(self, row: ClaimedTask, task: dict[str, Any]) -> None:
        if task.get("status") in ENDED:
            await self._finish(row, task)
            return
        message = task.get("statusMessage")
        if isinstance(message, str) and message and message != row.status_message:
            # The remote progress becomes the job's (dashboard, REST, SSE); the model is not
            # woken for it.
            await self.app.progress_async(row.job_id, message)
        polls = row.polls + 1
        hint = float(task.get("pollIntervalMs") or 0) / 1000
        wait = max(hint, exponential_ceiling(polls, base=self.base, cap=self.cap))
        await asyncio.to_thread(
            self.remote.table.reschedule,
            row.job_id,
            delay=wait,
            polls=polls,
            failures=0,
            status_message=task.get("statusMessage"),
        )
        self._count("working")

    async def _unreachable(self, row: ClaimedTask) -> None:
        failures = row.failures + 1
        wait = exponential(failures, base=self.base, cap=self.cap)
        await asyncio.to_thread(
            self.remote.table.reschedule,
            row.job_id,
            delay=wait,
            polls=row.polls,
            failures=failures,
        )
        self._count("unreachable")

    async def _finish(self, row: ClaimedTask, task: dict[str, Any]) -> None:
        """Answer the local job with how the task ended; then forget the row. A crash in
        between polls the ended task again, and the second answer changes nothing."""
        status = task.get("status")
        if status == "completed" and not (task.get("result") or {}).get("isError"):
            outcome = await self.app.complete_async(row.job_id, task_result(task))
        elif status == "cancelled":
            reason = task.get("statusMessage") or "the remote task was cancelled"
            outcome = await self.app.cancel_async(row.job_id, f"remote: {reason}")
        else:
            outcome = await self.app.fail_async(row.job_id, failure_reason(task))
        await asyncio.to_thread(self.remote.table.delete, row.job_id)
        self._count(f"{status}" if outcome.changed else "already_answered")
