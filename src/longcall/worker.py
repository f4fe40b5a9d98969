"""The worker: dispatcher, deliverer, sweeper, pruner and background runs in one asyncio loop.

As it sweeps, the worker also beats: its row in the store says it is alive and which
workflows it can run, so a queued run that no live worker can take is told apart from one
waiting its turn. A worker that stops deletes its row.

The deliverer runs up to ``deliveries`` sessions' deliveries at once (one at a time per
session), so one slow agent turn does not hold back the others.

A worker serves the ADK apps of the runners it is given, one deliverer per app: several apps
(an ``adk api_server`` agents folder) can share one database, each app's jobs are delivered
by its own runner, and a worker leaves the jobs of apps it has no runner for to the workers
that do.

SIGTERM (or SIGINT) stops claiming, lets each delivery in hand finish its message, gives back
the claims it has not started on, releases its session leases and returns. A delivery that is
still running after ``drain_timeout`` is cancelled; its lease runs out and another worker takes
the job.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from collections.abc import Sequence
from typing import Any

from longcall.agents import AgentRunner
from longcall.core.jobs import parse_duration
from longcall.core.retention import Retention
from longcall.cron import Crons
from longcall.jobs.delivery import Deliverer, check_deliveries
from longcall.jobs.dispatcher import Dispatcher
from longcall.jobs.engine import Jobs
from longcall.jobs.sweeper import Sweeper
from longcall.retention import Pruner
from longcall.workflows.run_worker import RunWorker
from longcall.workflows.runs import Workflows

log = logging.getLogger("longcall.worker")


def heartbeat_ttl(sweep_interval: float) -> float:
    """How long a worker counts as alive after a beat (it beats once per sweep): several
    missed sweeps, so that one slow sweep does not make it look dead."""
    return max(30.0, 4 * sweep_interval)


def check_runners(runners: Sequence[AgentRunner]) -> list[AgentRunner]:
    """``runners`` if each serves another app; ValueError naming the app served twice."""
    seen: set[str] = set()
    for runner in runners:
        if runner.app_name in seen:
            raise ValueError(
                f"two runners for the app {runner.app_name!r}: a worker delivers each app's "
                "jobs through one runner"
            )
        seen.add(runner.app_name)
    return list(runners)


class Worker:
    """The worker loops of one process.

    ``runner`` (or ``runners``, one per app) receive the finished jobs of their
    ``app_name``; without any, the worker still dispatches, sweeps and runs workflows.
    """

    def __init__(
        self,
        jobs: Jobs,
        workflows: Workflows,
        crons: Crons,
        runner: AgentRunner | None = None,
        *,
        runners: Sequence[AgentRunner] = (),
        runs: bool | None = None,
        run_concurrency: int = 8,
        run_queues: Sequence[str] | None = None,
        deliveries: int = 16,
        sweep_interval: str | float = "5s",
        dispatch_interval: str | float = "1s",
        drain_timeout: str | float = "30s",
        retention: Retention | None = None,
        **deliverer_options: Any,
    ) -> None:
        self.runtime = jobs.runtime
        self.workflows = workflows
        check_deliveries(deliveries)
        served = check_runners(([runner] if runner is not None else []) + list(runners))
        holder = deliverer_options.pop("holder", None)
        # Without an agent there is nothing to resume; the rest still has work to do.
        self.deliverers = [
            Deliverer(
                jobs,
                each,
                deliveries=deliveries,
                holder=holder
                if holder is None or len(served) == 1
                else f"{holder}/{each.app_name}",
                **deliverer_options,
            )
            for each in served
        ]
        self.deliverer = self.deliverers[0] if self.deliverers else None
        if runs is None:
            runs = bool(workflows.registry)
        self.runs = (
            RunWorker(workflows, concurrency=run_concurrency, queues=run_queues) if runs else None
        )
        # Schedules start runs; any number of workers may run the scheduler, each occurrence
        # is claimed once.
        self.scheduler = crons.scheduler() if runs else None
        self.sweeper = Sweeper(self.runtime, interval=sweep_interval)
        self.dispatcher = Dispatcher(jobs, interval=dispatch_interval)
        # Finished work older than its period goes (30 days unless told otherwise).
        self.pruner = Pruner(self.runtime, Retention() if retention is None else retention)
        self.drain_timeout = parse_duration(drain_timeout)
        self.stop_event: asyncio.Event | None = None
        self.worker_id = (
            self.runs.holder
            if self.runs is not None
            else f"{self.runtime.holder}/worker-{uuid.uuid4().hex[:6]}"
        )
        self.heartbeat_ttl = heartbeat_ttl(self.sweeper.interval)
        self._beaten = False

    def beat(self) -> None:
        """Record in the store that this worker is alive and which workflows it can run
        (none unless it runs background runs). Blocking: one statement."""
        workflows = list(self.workflows.registry) if self.runs is not None else []
        self.runtime.store.beat_worker(
            self.worker_id, workflows, ttl=self.heartbeat_ttl, first=not self._beaten
        )
        self._beaten = True

    def stop(self) -> None:
        """Ask :meth:`run` to drain and return (safe from a signal handler in the loop)."""
        for deliverer in self.deliverers:
            deliverer.stop_soon()
        if self.stop_event is not None:
            self.stop_event.set()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Run every loop until :meth:`stop` (or SIGTERM / SIGINT), then drain them.

        The loops run in one task group: a loop that dies of an error it does not handle
        stops the worker at once (the other loops are cancelled) and the error is raised
        here, so a supervisor sees a dead worker rather than one that quietly stopped
        delivering or running.
        """
        self.stop_event = stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        log.info("worker %s running", self.runtime.holder)
        try:
            async with asyncio.TaskGroup() as group:
                loops = [
                    group.create_task(self.sweeper.run(stop, each_pass=self.beat), name="sweeper"),
                    group.create_task(self.dispatcher.run(stop), name="dispatcher"),
                    group.create_task(self.pruner.run(stop), name="pruner"),
                ]
                for deliverer in self.deliverers:
                    name = f"deliverer {deliverer.app_name}"
                    loops.append(group.create_task(deliverer.run(stop), name=name))
                if self.runs is not None:
                    loops.append(group.create_task(self.runs.run(stop), name="runs"))
                if self.scheduler is not None:
                    loops.append(group.create_task(self.scheduler.run(stop), name="scheduler"))
                group.create_task(self._drain(stop, loops), name="drain")
        finally:
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            try:
                await self.runtime.in_thread(self.runtime.store.forget_worker, self.worker_id)
            except Exception:  # its row runs out by itself
                log.warning("worker %s could not delete its heartbeat", self.worker_id)
            log.info("worker %s stopped", self.runtime.holder)

    async def _drain(self, stop: asyncio.Event, loops: list[asyncio.Task[None]]) -> None:
        """Once stopped, give the loops ``drain_timeout`` to finish, then cancel the rest."""
        await stop.wait()
        _done, pending = await asyncio.wait(loops, timeout=self.drain_timeout)
        for task in pending:
            log.warning("cancelling %s after the drain timeout", task.get_name())
            task.cancel()
