"""What every engine runs on: the store, the clock, a thread pool for blocking store calls,
this process's holder identity and the lease settings.

The engines (jobs and delivery, workflows, cron) receive one :class:`Runtime` instead of the
:class:`~longcall.App` that owns it, so they depend on nothing above them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from longcall.core.clock import Clock
from longcall.core.observed import Observed
from longcall.errors import SyncInAsyncError
from longcall.store import Store
from longcall.telemetry import Telemetry

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

log = logging.getLogger("longcall")

P = ParamSpec("P")
T = TypeVar("T")


class Observers:
    """Who hears what the engines do (:mod:`longcall.core.observed`): the server's metrics,
    a worker's. A listener runs in the thread that did the work and must be quick; one that
    raises is logged, and the work goes on."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[Observed], None]] = []

    def listen(self, listener: Callable[[Observed], None]) -> None:
        self._listeners.append(listener)

    def tell(self, fact: Observed) -> None:
        for listener in self._listeners:
            try:
                listener(fact)
            except Exception:
                log.exception("a listener failed on %r", fact)


def new_holder_id(role: str = "app") -> str:
    """A name for one lease holder: host, process and a random suffix, readable in the table."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


class Runtime:
    """The store and the settings the engines share, and the pool their store calls run on.

    ``dispatch_lease``: how long a tool's submission is held before another process may retry
    it; ``session_lease``: how long a turn or a delivery holds a session without renewing;
    ``progress_throttle``: the least time between two progress notes reaching the model;
    ``tracer_provider``: where the spans go (:mod:`longcall.telemetry`; None: the global one).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        dispatch_lease: float,
        session_lease: float,
        progress_throttle: float,
        threads: int,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.dispatch_lease = dispatch_lease
        self.session_lease = session_lease
        self.progress_throttle = progress_throttle
        self.holder = new_holder_id()
        self.observers = Observers()
        self.telemetry = Telemetry(tracer_provider)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="longcall")

    def refuse_in_loop(self, method: str) -> None:
        """Raise :class:`SyncInAsyncError` when called from a thread running an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise SyncInAsyncError(method)

    async def in_thread(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking store call on the thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(func, *args, **kwargs))

    def start_in_thread(
        self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T]:
        """Start a blocking store call on the thread pool now, from the loop, and return a
        future for it. The call runs even if nobody awaits the future (and :meth:`close`
        waits for it)."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, functools.partial(func, *args, **kwargs))

    def call_in_thread(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> None:
        """Start a blocking call on the thread pool, from any thread, without waiting for it
        (RuntimeError once the runtime is closed)."""
        self._executor.submit(func, *args, **kwargs)

    def close(self) -> None:
        """Wait for the calls in flight and stop the pool (the store stays open)."""
        self._executor.shutdown(wait=True)
