"""Checkpoints held back for the run's end, and written anyway once they have waited long.

A sync run on PostgreSQL does not commit its task calls' checkpoints as they return: the
execution holds the latest one back and writes it before whatever the run records next (the
next task call, an event), or in the statement that ends the run. A one-task run then commits
twice (submit, end) instead of three times, and the commits, each waiting for the log to
reach the disk, are what a busy database serves slowest. Should the run go on without
recording anything for ``delay`` (a long computation after its last task), one thread here
writes the checkpoint, so a crash in that time loses no more than ``delay`` of finished work:
its task runs again on resume, as it would had the crash come just before its commit.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

log = logging.getLogger("longcall.workflows")


class HoldsBack(Protocol):
    """What the writer needs of an execution."""

    def write_held_back(self) -> None:
        """Write the checkpoint held back, if there still is one."""
        ...


class LateCheckpoints:
    """Writes, from one daemon thread, the checkpoints held back ``delay`` seconds or more."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._due: dict[int, tuple[float, HoldsBack]] = {}  # by id: the latest hold counts
        self._changed = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._idle = False  # the thread waits to be told of work, not for a time
        self._closed = False

    def held(self, execution: HoldsBack) -> None:
        """``execution`` holds a checkpoint back from now on."""
        with self._changed:
            self._due[id(execution)] = (time.monotonic() + self.delay, execution)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._write_late, name="longcall-checkpoints", daemon=True
                )
                self._thread.start()
            elif self._idle:
                self._changed.notify()
            # Otherwise the thread wakes before this one is due anyway.

    def released(self, execution: HoldsBack) -> None:
        """``execution`` holds nothing back any more (it wrote its checkpoint, or its end
        took it): nothing to write for it, and no reason to wake for it."""
        with self._changed:
            self._due.pop(id(execution), None)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(5)

    def _write_late(self) -> None:
        quiet = False  # nothing was held at the last wake either
        while True:
            with self._changed:
                if self._closed:
                    return
                if not self._due:
                    # A checkpoint held during this wait is due only after it ends, so
                    # nobody needs to wake the thread: a stream of short runs wakes it once
                    # a ``delay``, not once a run. Nothing held for a whole ``delay``: it
                    # waits until told.
                    self._idle = quiet
                    self._changed.wait(None if quiet else self.delay)
                    self._idle = False
                    quiet = not quiet and not self._due
                    continue
                quiet = False
                now = time.monotonic()
                first = min(at for at, _ in self._due.values())
                if first > now:
                    self._changed.wait(first - now)
                    continue
                due = [e for at, e in self._due.values() if at <= now]
                for execution in due:
                    del self._due[id(execution)]
            for execution in due:  # most have ended since, with their checkpoint
                try:
                    execution.write_held_back()
                except Exception:  # the run's next task call or its end tries again
                    log.warning("writing a held-back checkpoint failed", exc_info=True)
