"""The dispatcher: the outbox's other end.

A tool submits its work right after the job row commits. If the process dies in between, the
``dispatch`` item stays in the outbox and, once its hold runs out, the dispatcher runs the
tool's body again with the same job id (the body's idempotency key) and ``attempt`` > 1.
``cancel`` items call the tool's ``on_cancel`` hook after an expiry or a cancellation; they
are queued only for jobs whose tool declared one when the job was created (a job created over
``POST /v1/jobs`` for a tool outside Python has none), so no worker retries a missing hook.
Failures are retried with backoff; a dispatch that keeps failing fails its job, so the agent
hears of it instead of waiting for the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging

from longcall.core.backoff import jittered
from longcall.core.jobs import JobState, parse_duration
from longcall.jobs.engine import Jobs
from longcall.jobs.tools import JobHandle, pending_answer
from longcall.logs import about
from longcall.runtime import new_holder_id
from longcall.store import OutboxItem

log = logging.getLogger("longcall.dispatcher")


class Dispatcher:
    def __init__(
        self,
        jobs: Jobs,
        *,
        holder: str | None = None,
        batch: int = 32,
        lease: str | float = "60s",
        max_attempts: int = 5,
        interval: str | float = "1s",
    ) -> None:
        self.jobs = jobs
        self.holder = holder or new_holder_id("dispatcher")
        self.batch = batch
        self.lease = parse_duration(lease)
        self.max_attempts = max_attempts
        self.interval = parse_duration(interval)

    async def run_once(self) -> int:
        items = await self.jobs.runtime.in_thread(
            self.jobs.runtime.store.claim_outbox, self.holder, limit=self.batch, lease=self.lease
        )
        for item in items:
            await self._handle(item)
        return len(items)

    async def _handle(self, item: OutboxItem) -> None:
        runtime, store = self.jobs.runtime, self.jobs.runtime.store
        tool = self.jobs.tools.get(item.tool_name)
        if tool is None:
            await self._failed(item, f"no tool {item.tool_name!r} is registered in this process")
            return
        try:
            job = await runtime.in_thread(store.get_job, item.job_id)
            if item.kind == "dispatch":
                # The creator's own try was the first; the outbox counts the re-submissions.
                handle = JobHandle.of(job, attempt=item.attempts + 1)
                if job.state is JobState.STARTED:
                    values = tool.validate(job.args)
                    returned = await tool.call_body_async(handle, values)
                    answer = pending_answer(returned, tool_name=tool.name, job_id=job.job_id)
                    await runtime.in_thread(
                        store.finish_dispatch, item.job_id, answer.message, answer.fields
                    )
                    log.info(
                        "re-submitted job %s (attempt %d)",
                        item.job_id,
                        handle.attempt,
                        extra=about(job_id=item.job_id),
                    )
                    return
            elif tool.on_cancel is not None:
                handle = JobHandle.of(job, attempt=item.attempts)
                # A sync hook (an HTTP call, say) runs on a thread: on the loop it would stall
                # the deliverer's lease heartbeats, and a stalled holder loses its sessions.
                if inspect.iscoroutinefunction(tool.on_cancel):
                    await tool.on_cancel(handle)
                else:
                    result = await asyncio.to_thread(tool.on_cancel, handle)
                    if asyncio.iscoroutine(result):
                        await result
            await runtime.in_thread(store.finish_outbox, item.job_id, item.kind)
        except Exception as exc:
            await self._failed(item, f"{type(exc).__name__}: {exc}")

    async def _failed(self, item: OutboxItem, error: str) -> None:
        runtime, store = self.jobs.runtime, self.jobs.runtime.store
        if item.attempts >= self.max_attempts:
            log.error(
                "giving up %s of job %s: %s",
                item.kind,
                item.job_id,
                error,
                extra=about(job_id=item.job_id),
            )
            await runtime.in_thread(store.finish_outbox, item.job_id, item.kind)
            await runtime.in_thread(
                store.record,
                item.job_id,
                f"{item.kind}_abandoned",
                {"error": error, "attempts": item.attempts},
            )
            if item.kind == "dispatch":
                await runtime.in_thread(
                    store.finish,
                    item.job_id,
                    JobState.FAILED,
                    {"error": f"the work could not be submitted: {error}"},
                )
            return
        delay = jittered(min(300.0, 2.0**item.attempts))
        log.warning(
            "%s of job %s failed (attempt %d), retrying in %.1fs: %s",
            item.kind,
            item.job_id,
            item.attempts,
            delay,
            error,
            extra=about(job_id=item.job_id),
        )
        await runtime.in_thread(store.retry_outbox, item, self.holder, error=error, delay=delay)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                handled = await self.run_once()
            except Exception:
                log.exception("dispatch pass failed; retrying")
                handled = 0
            if handled:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
