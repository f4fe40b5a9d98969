"""One look at the store per server for every open event stream: the jobs changed lately.

Streams see changes made by any process (other servers, workers, the CLI) by reading the jobs
whose ``updated_at`` moved. Each stream once asked the store itself on every poll; with a
thousand streams open that was a thousand queries every half second through the shared
thread pool. The feed asks once per poll for every job changed in the last ``LOOKBACK``
seconds, keeps them in memory, and each stream picks from it the jobs its caller may see.

A transaction can commit a little after the time it stamped on the job, so the feed looks
``LOOKBACK`` seconds behind the newest change it has seen, and keeps twice that in memory: a
stream that reads a poll late still finds what committed before it. The feed polls only while
a stream follows it, and stops a little after the last one closes, or when the server starts
shutting down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from longcall.app import App
from longcall.core.jobs import Job
from longcall.errors import StoreError

log = logging.getLogger("longcall.server")

LOOKBACK = 5.0  # seconds a change may commit after the time it was stamped with
PAGE = 200  # jobs per query when the feed reads the changes of one poll
LINGER = 10.0  # seconds the feed goes on after its last stream closed


class ChangeFeed:
    """The jobs changed in the last moments, read once per ``poll`` seconds for all streams."""

    def __init__(self, app: App, *, poll: float, closing: asyncio.Event) -> None:
        self._app = app
        self._poll = poll
        self._closing = closing
        self._jobs: dict[str, Job] = {}  # the newest version of each job changed lately
        self._encoded: dict[tuple[str, float], bytes] = {}  # (job id, version) -> message
        self._followers = 0
        self._wanted_at = 0.0  # when a stream last asked for the feed or stopped following it
        self._task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._trouble: StoreError | None = None
        self.newest = 0.0  # the newest updated_at the feed has seen (0: no job yet)
        self.polls = 0  # how many times the feed asked the store (for tests and benchmarks)

    async def ready(self) -> None:
        """Make sure the feed is following the store, and has looked at least once. A stream
        calls this before its answer goes out (where it starts is settled then), and follows
        the feed (:meth:`following`) once its body runs; the feed waits ``LINGER`` seconds
        for it in between."""
        self._wanted_at = time.monotonic()
        async with self._starting:
            if self._task is None:
                await self._look()
                self._task = asyncio.create_task(self._run(), name="longcall change feed")
        self.check()

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[ChangeFeed]:
        """Follow the feed for as long as the block runs (a stream's life)."""
        self._followers += 1
        try:
            await self.ready()
            yield self
        finally:
            self._followers -= 1
            self._wanted_at = time.monotonic()

    def check(self) -> None:
        """Raise the error of the last look at the store, if it failed: a stream then ends,
        and its client reconnects, as when it asked the store itself."""
        if self._trouble is not None:
            raise self._trouble

    def encoded(self, job: Job, encode: Callable[[Job], bytes]) -> bytes:
        """``encode(job)``, made once per version of a job for every stream that sends it
        (a thousand streams sending one change serialize it once)."""
        key = (job.job_id, job.updated_at)
        found = self._encoded.get(key)
        if found is None:
            found = self._encoded[key] = encode(job)
        return found

    def changed_since(self, since: float) -> list[Job]:
        """The jobs whose last change is at or after ``since``, oldest change first; ``since``
        no older than ``LOOKBACK`` seconds before :attr:`newest` to find them all."""
        found = [job for job in self._jobs.values() if job.updated_at >= since]
        found.sort(key=lambda job: (job.updated_at, job.job_id))
        return found

    def version_of(self, job_id: str) -> float | None:
        """The updated_at of the job's last change seen lately, or None."""
        job = self._jobs.get(job_id)
        return None if job is None else job.updated_at

    def _wanted(self) -> bool:
        if self._closing.is_set():
            return False
        return self._followers > 0 or time.monotonic() - self._wanted_at < LINGER

    async def _run(self) -> None:
        try:
            while self._wanted():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), self._poll)
                if not self._wanted():
                    break
                await self._look()
        finally:
            self._task = None

    async def _look(self) -> None:
        try:
            if self._task is None:
                # Not following yet (the first stream opens): from the newest change on, not
                # from wherever the feed stopped when the last stream closed. With no job
                # yet, newest stays 0 and the next look reads every job, all of them new.
                self._jobs.clear()
                newest = await self._app.in_thread(self._app.monitor.last_change)
                self.newest = newest or 0.0
            since, after_id = self.newest - LOOKBACK, ""
            while True:
                page = await self._app.in_thread(
                    self._app.monitor.changed_jobs, since, after_id, limit=PAGE
                )
                for job in page:
                    self._jobs[job.job_id] = job
                if len(page) < PAGE:
                    break
                since, after_id = page[-1].updated_at, page[-1].job_id
        except StoreError as exc:
            log.warning("the event streams' look at the store failed: %s", exc)
            self._trouble = exc
            return
        finally:
            self.polls += 1
        self._trouble = None
        if self._jobs:
            self.newest = max(self.newest, max(job.updated_at for job in self._jobs.values()))
        keep_from = self.newest - 2 * LOOKBACK
        for job_id in [k for k, job in self._jobs.items() if job.updated_at < keep_from]:
            del self._jobs[job_id]
        for key in [k for k in self._encoded if k[1] < keep_from]:
            del self._encoded[key]


class JobWatch:
    """When the stream of one job should look at the store again: when the feed shows the job
    at a version not looked at yet, and every ``FALLBACK`` seconds in any case (an entry of
    the job's log that changes nothing else, such as a failed hook call, moves no
    ``updated_at``)."""

    FALLBACK = 5.0  # seconds

    def __init__(self, feed: ChangeFeed, job_id: str) -> None:
        self._feed = feed
        self._job_id = job_id
        self._version: float | None = None
        self._looked_at: float | None = None

    def due(self) -> bool:
        self._feed.check()
        version = self._feed.version_of(self._job_id)
        now = time.monotonic()
        stale = self._looked_at is None or now - self._looked_at >= self.FALLBACK
        if not stale and version == self._version:
            return False
        self._version, self._looked_at = version, now
        return True
