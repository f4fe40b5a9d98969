"""Durable streams: ``ctx.stream(key, value)`` in a run, ``app.read_stream(run_id, key)`` anywhere.

Writing. Each write is committed at once, in its own transaction, so a reader in another
process sees it within one poll. What a replay does:

- From the workflow body, a write is identified by the body's position and its count there
  (``b<position>.<n>``); the body runs again on every resume and writes the same origins,
  which insert nothing. Exactly once, as long as the body is deterministic (as it must be).
- From a task, a write is identified by the task's position, the execution and the attempt
  (``t<position>.<execution>.a<attempt>.<n>``). A task attempt that fails and is retried,
  in this process or after a crash, keeps what it wrote, and the next attempt appends its
  own: at least once per attempt, like DBOS's writes from a step. Each item says which attempt
  wrote it (``StreamItem.attempt``), so a reader can tell a restart from a continuation and
  drop the partial output of the attempt before.

A stream ends when the run closes it (``ctx.close_stream``) or when the run completes, fails
or is cancelled, whichever is first: readers always reach an end. Writes are refused once
the run is no longer the writer's (taken over after its lease ran out) and after a close.

Reading polls the store, 5 ms after an item, backing off to 20 ms within a second of it and
to ``POLL_MAX`` (200 ms) once the stream is quiet: a reader costs one indexed query per look,
on any backend, and needs no connection of its own (a server may hold many streams open).
PostgreSQL's LISTEN/NOTIFY is not used: every NOTIFY wakes every listening session in the
database (the run workers' watch, the deliverers), and a token stream would send one per
token.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from longcall.errors import WorkflowError
from longcall.runtime import Runtime
from longcall.store._run_streams import StreamClosed, StreamItem
from longcall.workflows._timers import checked_name
from longcall.workflows.messages import checked

POLL_MIN = 0.005  # seconds: the first look after an empty one
POLL_ACTIVE = 0.02  # the longest wait within ACTIVE_FOR of the last item: a token stream
ACTIVE_FOR = 1.0  # that pauses for a moment is not left waiting for a long backoff
POLL_MAX = 0.2  # the longest a quiet stream waits between looks


def next_wait(wait: float, quiet_for: float) -> float:
    """The wait after ``wait`` found nothing, ``quiet_for`` seconds after the last item."""
    return min(wait * 2, POLL_ACTIVE if quiet_for < ACTIVE_FOR else POLL_MAX)


PAGE = 500  # items read per look


class StreamWriter:
    """One execution's writes: the counters that make each write's origin."""

    def __init__(self) -> None:
        # A crashed execution's task attempts must not share origins with the next one's.
        self.execution = uuid.uuid4().hex[:8]
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()  # tasks running at once, on threads

    def origin(self, scope: str) -> str:
        with self._lock:
            n = self._counts.get(scope, 0)
            self._counts[scope] = n + 1
        return f"{scope}.{n}"


def data_of(value: Any) -> Any:
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise WorkflowError(f"ctx.stream takes JSON data: {exc}") from None


def write(
    runtime: Runtime,
    run_id: str,
    holder: str,
    origin: str,
    key: str,
    value: Any,
    *,
    close: bool = False,
) -> int | None:
    """Append to (or close) the stream; its seq, or None when nothing was written."""
    return runtime.store.write_stream(run_id, holder, key, origin, value, close=close)


def stream_key(key: Any) -> str:
    return checked_name("stream key", key)


def _start(runtime: Runtime, run_id: str, key: str, after: int | None) -> int:
    checked("run_id", run_id)
    checked("event_key", key)
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise ValueError(f"after is a stream position (a whole number of 0 or more): {after!r}")
    runtime.store.get_run(run_id)  # RunNotFound before any item is awaited
    return after or 0


def read(
    runtime: Runtime,
    run_id: str,
    key: str,
    *,
    after: int | None = None,
    timeout: float | None = None,
) -> Iterator[StreamItem]:
    """The stream's items after ``after``, live, until its end; TimeoutError when
    ``timeout`` seconds pass without a new item."""
    position = _start(runtime, run_id, key, after)
    return _read(runtime, run_id, key, position, timeout)


def _read(
    runtime: Runtime, run_id: str, key: str, after: int, timeout: float | None
) -> Iterator[StreamItem]:
    store = runtime.store
    wait = POLL_MIN
    quiet_since = time.monotonic()
    while True:
        items, ended = store.stream_items(run_id, key, after=after, limit=PAGE)
        for item in items:
            after = item.seq
            yield item
        if ended:
            return
        if items:
            wait, quiet_since = POLL_MIN, time.monotonic()
            continue
        if timeout is not None and time.monotonic() - quiet_since >= timeout:
            raise TimeoutError(f"no item of stream {key!r} of run {run_id!r} for {timeout}s")
        time.sleep(wait)
        wait = next_wait(wait, time.monotonic() - quiet_since)


async def read_async(
    runtime: Runtime,
    run_id: str,
    key: str,
    *,
    after: int | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - between two items, not for the whole read
) -> AsyncIterator[StreamItem]:
    """:func:`read` for ``async for``: each look runs on the runtime's threads."""
    position = await runtime.in_thread(_start, runtime, run_id, key, after)
    wait = POLL_MIN
    quiet_since = time.monotonic()
    while True:
        items, ended = await runtime.in_thread(
            runtime.store.stream_items, run_id, key, after=position, limit=PAGE
        )
        for item in items:
            position = item.seq
            yield item
        if ended:
            return
        if items:
            wait, quiet_since = POLL_MIN, time.monotonic()
            continue
        if timeout is not None and time.monotonic() - quiet_since >= timeout:
            raise TimeoutError(f"no item of stream {key!r} of run {run_id!r} for {timeout}s")
        await asyncio.sleep(wait)
        wait = next_wait(wait, time.monotonic() - quiet_since)


__all__ = ["StreamClosed", "StreamItem", "StreamWriter", "read", "read_async"]
