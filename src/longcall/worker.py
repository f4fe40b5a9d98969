"""The worker: dispatcher, resumer, sweeper and background runs in one asyncio loop.

SIGTERM (or SIGINT) stops claiming, lets the delivery in hand finish, gives back the claims it
has not started on, releases its session leases and returns. A delivery that is still running
after ``drain_timeout`` is cancelled; its lease runs out and another worker takes the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import TYPE_CHECKING, Any

from longcall.agents import AgentRunner
from longcall.dispatcher import Dispatcher
from longcall.jobs import parse_duration
from longcall.resumer import Resumer
from longcall.sweeper import Sweeper

if TYPE_CHECKING:
    from longcall.app import App

log = logging.getLogger("longcall.worker")


class Worker:
    def __init__(
        self,
        app: App,
        runner: AgentRunner | None = None,
        *,
        runs: bool | None = None,
        run_concurrency: int = 8,
        sweep_interval: str | float = "5s",
        dispatch_interval: str | float = "1s",
        drain_timeout: str | float = "30s",
        **resumer_options: Any,
    ) -> None:
        self.app = app
        # Without an agent there is nothing to resume; the rest still has work to do.
        self.resumer = Resumer(app, runner, **resumer_options) if runner is not None else None
        if runs is None:
            runs = bool(app.workflows.registry)
        self.runs = app.run_worker(concurrency=run_concurrency) if runs else None
        # Schedules start runs; any number of workers may run the scheduler, each occurrence
        # is claimed once.
        self.scheduler = app.crons.scheduler() if runs else None
        self.sweeper = Sweeper(app, interval=sweep_interval)
        self.dispatcher = Dispatcher(app, interval=dispatch_interval)
        self.drain_timeout = parse_duration(drain_timeout)
        self.stop_event: asyncio.Event | None = None

    def stop(self) -> None:
        """Ask :meth:`run` to drain and return (safe from a signal handler in the loop)."""
        if self.resumer is not None:
            self.resumer.stop_soon()
        if self.stop_event is not None:
            self.stop_event.set()

    async def run(self, *, handle_signals: bool = True) -> None:
        self.stop_event = stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        tasks = [
            asyncio.create_task(self.sweeper.run(stop), name="sweeper"),
            asyncio.create_task(self.dispatcher.run(stop), name="dispatcher"),
        ]
        if self.resumer is not None:
            tasks.append(asyncio.create_task(self.resumer.run(stop), name="resumer"))
        if self.runs is not None:
            tasks.append(asyncio.create_task(self.runs.run(stop), name="runs"))
        if self.scheduler is not None:
            tasks.append(asyncio.create_task(self.scheduler.run(stop), name="scheduler"))
        log.info("worker %s running", self.app.holder)
        try:
            await stop.wait()
            _done, pending = await asyncio.wait(tasks, timeout=self.drain_timeout)
            for task in pending:
                log.warning("cancelling %s after the drain timeout", task.get_name())
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            for task in tasks:
                task.cancel()
            log.info("worker %s stopped", self.app.holder)
