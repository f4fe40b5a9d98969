"""The App: owns the store, the tool registry and the settings. No module-level state.

Each public operation comes in two forms: ``complete_async`` for async code and ``complete``
for everything else. The sync form refuses to run inside an event loop (it would block the
loop) and names the async one instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from longcall.access import Access
from longcall.agents import AgentEvent, AgentRunner, Message
from longcall.core.clock import Clock, SystemClock
from longcall.core.deprecation import deprecated
from longcall.core.jobs import (
    CallIds,
    FinishOutcome,
    Job,
    JobEvent,
    JobState,
    SessionKey,
    job_id_for,
    parse_duration,
)
from longcall.core.observed import Observed
from longcall.core.queues import Queue, QueueStats
from longcall.core.retention import Retention
from longcall.core.runs import HistoryEntry, Run, RunEvent, RunStatus, RunVersion
from longcall.cron import Crons
from longcall.jobs.delivery import Deliverer
from longcall.jobs.engine import Jobs
from longcall.jobs.observer import CallObserver
from longcall.jobs.sweeper import Sweeper
from longcall.jobs.tools import JobHandle, LongRunningTool
from longcall.monitor import Monitor
from longcall.retention import Pruner
from longcall.runtime import Runtime
from longcall.store import Store, open_store
from longcall.store._run_messages import SentMessage
from longcall.store._run_streams import StreamItem
from longcall.store.base import Ingested, NewJob
from longcall.worker import Worker
from longcall.workflows import (
    RetryPolicy,
    RunDetails,
    Task,
    TaskContext,
    Workflow,
    forks,
    messages,
    streams,
)
from longcall.workflows._versions import checked_version
from longcall.workflows.queues import Queues
from longcall.workflows.run_worker import RunWorker
from longcall.workflows.runs import TaskDecorator, WorkflowDecorator, Workflows
from longcall.workflows.state import Reducer, StateSchemaValidator

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider
    from typing_extensions import Unpack

    from longcall.options import (
        DelivererOptions,
        JobFilters,
        RunWorkerOptions,
        SweeperOptions,
        WorkerOptions,
    )

log = logging.getLogger("longcall")
P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")

DEFAULT_URL = "sqlite:///longcall.db"


class App:
    """longcall in one object: ``App("sqlite:///longcall.db")`` or ``App("postgresql://…")``.

    ``migrate`` (default True) brings the schema up to date on first use; with False an
    outdated schema raises :class:`~longcall.errors.SchemaError` naming ``longcall migrate``.
    ``tracer_provider`` receives the spans (:mod:`longcall.telemetry`; default: the global one).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        migrate: bool = True,
        progress_throttle: str | float = "10s",
        dispatch_lease: str | float = "60s",
        session_lease: str | float = "60s",
        run_lease: str | float = "60s",
        run_retry: str | float = "1s",
        checkpoint_delay: str | float = "20ms",
        threads: int = 8,
        store: Store | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.url = url or os.environ.get("LONGCALL_DATABASE_URL") or DEFAULT_URL
        clock = clock or SystemClock()
        store = store or open_store(self.url, clock)
        try:
            if migrate:
                store.migrate()
            else:
                store.check_schema()
        except BaseException:
            store.close()
            raise
        self.runtime = Runtime(
            store,
            clock,
            dispatch_lease=parse_duration(dispatch_lease),
            session_lease=parse_duration(session_lease),
            progress_throttle=parse_duration(progress_throttle),
            threads=threads,
            tracer_provider=tracer_provider,
        )
        # The engines, side by side on the runtime.
        self.jobs = Jobs(self.runtime)
        self.tools = self.jobs.tools
        self.delivery_listeners = self.jobs.delivery_listeners
        # A run's holder renews its lease every third of it; a holder that dies loses the run
        # to whoever continues it once the lease has run out.
        self.workflows = Workflows(
            self.runtime,
            lease=parse_duration(run_lease),
            retry_base=parse_duration(run_retry),
            checkpoint_delay=parse_duration(checkpoint_delay),
        )
        self.crons = Crons(self.runtime, self.workflows)
        self.queues = Queues(self.runtime)
        # API tokens, dashboard logins and webhook secrets.
        self.access = Access(self.runtime)
        # What dashboards, metrics and health checks read.
        self.monitor = Monitor(self.runtime)

    # -- the runtime's parts, read through (the engines hold the runtime) ---------------

    @property
    def store(self) -> Store:
        return self.runtime.store

    @store.setter
    def store(self, store: Store) -> None:
        self.runtime.store = store

    def observe(self, listener: Callable[[Observed], None]) -> None:
        """Have ``listener`` told what this process's engines do as they do it (tasks done,
        runs ended, cron occurrences fired and misfired: :mod:`longcall.core.observed`), in
        the thread that did it; the server's and the worker's metrics listen so."""
        self.runtime.observers.listen(listener)

    @property
    def dialect(self) -> str:
        """The database's: ``sqlite`` or ``postgres``."""
        return self.runtime.store.dialect

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    @property
    def holder(self) -> str:
        return self.runtime.holder

    @property
    def progress_throttle(self) -> float:
        return self.runtime.progress_throttle

    @property
    def dispatch_lease(self) -> float:
        return self.runtime.dispatch_lease

    @property
    def session_lease(self) -> float:
        return self.runtime.session_lease

    # -- plumbing -----------------------------------------------------------------------

    def refuse_in_loop(self, method: str) -> None:
        """Raise :class:`SyncInAsyncError` when called from a thread running an event loop."""
        self.runtime.refuse_in_loop(method)

    async def in_thread(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking store call on the app's thread pool."""
        return await self.runtime.in_thread(func, *args, **kwargs)

    def start_in_thread(
        self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T]:
        """Start a blocking store call on the app's thread pool now (see
        :meth:`Runtime.start_in_thread`)."""
        return self.runtime.start_in_thread(func, *args, **kwargs)

    def call_in_thread(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> None:
        """Start a blocking call on the app's thread pool, from any thread, without waiting
        for it (RuntimeError once the app is closed)."""
        self.runtime.call_in_thread(func, *args, **kwargs)

    def stop_retries(self) -> None:
        """End the store's retry loops at their next pause, and refuse new ones: a process
        shutting down does not wait out a database outage (a server's shutdown calls it)."""
        self.runtime.store.retries.stop()

    def allow_retries(self) -> None:
        """Let the store retry again after :meth:`stop_retries` (a server started again)."""
        self.runtime.store.retries.restart()

    def close(self) -> None:
        self.runtime.close()
        self.workflows.heartbeat.close()
        self.workflows.late_checkpoints.close()
        self.store.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tools --------------------------------------------------------------------------

    @overload
    def long_running(self, func: F, /) -> LongRunningTool: ...

    @overload
    def long_running(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        key: str | None = None,
        deadline: str | float | None = None,
        on_cancel: Callable[[JobHandle], Any] | None = None,
        description: str | None = None,
        context_types: Sequence[type] = (),
    ) -> Callable[[F], LongRunningTool]: ...

    def long_running(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        key: str | None = None,
        deadline: str | float | None = None,
        on_cancel: Callable[[JobHandle], Any] | None = None,
        description: str | None = None,
        context_types: Sequence[type] = (),
    ) -> LongRunningTool | Callable[[F], LongRunningTool]:
        """Register a long-running tool.

        ``key`` is a format string over the parameters (and ``user_id``, ``session_id`` …)
        that names the job: the same key is the same job, and its work is submitted once.
        A call with a user gets the key in that user's namespace (``key@<16 hex>``, see
        :func:`longcall.job_id_for`), so another user's job of the same key never blocks it;
        the job handle's ``id`` is the id to complete it by.
        ``deadline`` (``"45m"``) makes the sweeper answer for a result that never comes;
        ``on_cancel`` is called with the job when it expires or is cancelled, so the
        external work can stop. ``context_types``: parameter types a framework fills in
        (google-adk's ``ToolContext``), hidden from the model like :class:`JobHandle`.
        """

        def register(f: Callable[..., Any]) -> LongRunningTool:
            return self.jobs.register(
                f,
                name=name,
                key=key,
                deadline=deadline,
                on_cancel=on_cancel,
                description=description,
                context_types=context_types,
            )

        return register(func) if func is not None else register

    # -- completions --------------------------------------------------------------------

    def complete(self, job_id: str, result: Any = None) -> FinishOutcome:
        """Record a job's result. The first terminal result wins; later ones change nothing."""
        self.refuse_in_loop("complete")
        return self.jobs.completions.finish(job_id, JobState.SUCCEEDED, result)

    async def complete_async(self, job_id: str, result: Any = None) -> FinishOutcome:
        return await self.jobs.completions.finish_async(job_id, JobState.SUCCEEDED, result)

    def fail(self, job_id: str, error: str | dict[str, Any]) -> FinishOutcome:
        """Record that a job failed; ``error`` is a message or a JSON object."""
        self.refuse_in_loop("fail")
        return self.jobs.completions.finish(job_id, JobState.FAILED, _error_body(error))

    async def fail_async(self, job_id: str, error: str | dict[str, Any]) -> FinishOutcome:
        return await self.jobs.completions.finish_async(job_id, JobState.FAILED, _error_body(error))

    def cancel(self, job_id: str, reason: str | None = None) -> FinishOutcome:
        """Cancel a job: the agent hears so, and the tool's ``on_cancel`` hook is called."""
        self.refuse_in_loop("cancel")
        return self.jobs.completions.finish(
            job_id, JobState.CANCELLED, _cancel_body(reason), request_cancel=True
        )

    async def cancel_async(self, job_id: str, reason: str | None = None) -> FinishOutcome:
        return await self.jobs.completions.finish_async(
            job_id, JobState.CANCELLED, _cancel_body(reason), request_cancel=True
        )

    def progress(self, job_id: str, data: Any, *, notify_model: bool = False) -> Job | None:
        """Append progress to the job's log; the model hears of it only with ``notify_model``.

        Announcements are throttled per job (``progress_throttle``): several quick updates
        reach the model as the latest one. Returns None when the job already finished.
        """
        self.refuse_in_loop("progress")
        return self.store.progress(
            job_id, data, notify=notify_model, throttle=self.progress_throttle
        )

    async def progress_async(
        self, job_id: str, data: Any, *, notify_model: bool = False
    ) -> Job | None:
        return await self.in_thread(
            self.store.progress, job_id, data, notify=notify_model, throttle=self.progress_throttle
        )

    def ingest(
        self,
        *,
        source: str,
        delivery_id: str,
        job_id: str,
        kind: str,
        payload: Any = None,
        notify_model: bool = False,
    ) -> Ingested:
        """Apply a delivery from outside at most once per ``(source, delivery_id)``.

        For verified webhooks: ``kind`` is ``complete``, ``fail``, ``cancel`` or
        ``progress``; a repeat is a ``duplicate`` and changes nothing; a result for a job not
        created yet is kept and applied when it is (see :meth:`Store.ingest`).
        """
        self.refuse_in_loop("ingest")
        return self.jobs.completions.ingest(
            source=source,
            delivery_id=delivery_id,
            job_id=job_id,
            kind=kind,
            payload=payload,
            notify=notify_model,
            throttle=self.progress_throttle,
        )

    async def ingest_async(
        self,
        *,
        source: str,
        delivery_id: str,
        job_id: str,
        kind: str,
        payload: Any = None,
        notify_model: bool = False,
    ) -> Ingested:
        return await self.jobs.completions.ingest_async(
            source=source,
            delivery_id=delivery_id,
            job_id=job_id,
            kind=kind,
            payload=payload,
            notify=notify_model,
            throttle=self.progress_throttle,
        )

    def create_job(
        self,
        tool_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
        job_id: str | None = None,
        ids: CallIds | None = None,
        deadline: str | float | None = None,
    ) -> tuple[Job, bool]:
        """Record a job whose work runs outside Python (``POST /v1/jobs``); the agent hears its
        result as it hears a long-running tool's. Returns the job and whether this call made it.

        ``key`` names it in its user's namespace, as a tool's key does
        (:func:`~longcall.job_id_for`); ``job_id`` names the stored id in full; with neither it
        gets a fresh id. The same key or id finds the job made before. A tool of that name
        registered here with ``on_cancel`` has the hook called when the job is cancelled or
        expires. :class:`~longcall.errors.AttachConflict` when the call already has a job.
        """
        self.refuse_in_loop("create_job")
        ids = ids or CallIds()
        legacy_id = None
        if job_id is None and key is not None:
            job_id, legacy_id = job_id_for(key, ids.user_id), key
        tool = self.tools.get(tool_name)
        new = NewJob(
            job_id or f"job-{uuid.uuid4().hex}",
            tool_name,
            dict(args or {}),
            ids,
            None if deadline is None else parse_duration(deadline),
            cancel_hook=tool is not None and tool.on_cancel is not None,
            legacy_id=legacy_id,
            trace_context=self.runtime.telemetry.trace_context(),
        )
        # No body to submit: the work is already under way elsewhere.
        return self.store.create_job(new, holder=self.holder, dispatch_lease=0, dispatch=False)

    async def create_job_async(
        self,
        tool_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
        job_id: str | None = None,
        ids: CallIds | None = None,
        deadline: str | float | None = None,
    ) -> tuple[Job, bool]:
        return await self.in_thread(
            self.create_job, tool_name, args, key=key, job_id=job_id, ids=ids, deadline=deadline
        )

    def attach(self, job_id: str, ids: CallIds) -> Job:
        """Join a job to its session and call; only empty columns are filled."""
        self.refuse_in_loop("attach")
        return self.store.attach(job_id, ids)

    async def attach_async(self, job_id: str, ids: CallIds) -> Job:
        return await self.in_thread(self.store.attach, job_id, ids)

    def redeliver(self, job_id: str, *, app_name: str | None = None) -> Job:
        """Send an orphaned (or given-up) job's response again, once its cause is fixed.

        The job is ready for delivery again with fresh attempts; the error that stopped it
        stays in its log (a ``redelivered`` event). ``app_name`` sends it to that app's
        session instead (it went to the wrong one). Raises
        :class:`~longcall.errors.NotRedeliverable` for any other delivery state (nothing
        changes) and :class:`~longcall.errors.JobNotFound` for an unknown id.
        """
        self.refuse_in_loop("redeliver")
        return self.store.redeliver(job_id, app_name=app_name)

    async def redeliver_async(self, job_id: str, *, app_name: str | None = None) -> Job:
        return await self.in_thread(self.store.redeliver, job_id, app_name=app_name)

    # -- reading ------------------------------------------------------------------------

    def get_job(self, job_id: str) -> Job:
        self.refuse_in_loop("get_job")
        return self.store.get_job(job_id)

    async def get_job_async(self, job_id: str) -> Job:
        return await self.in_thread(self.store.get_job, job_id)

    def list_jobs(self, **filters: Unpack[JobFilters]) -> list[Job]:
        """Newest first; filters: state, tool_name, session_id, user_id, delivery, before, limit."""
        self.refuse_in_loop("list_jobs")
        return self.store.list_jobs(**filters)

    async def list_jobs_async(self, **filters: Unpack[JobFilters]) -> list[Job]:
        return await self.in_thread(self.store.list_jobs, **filters)

    def job_events(self, job_id: str, *, after: int = 0) -> list[JobEvent]:
        self.refuse_in_loop("job_events")
        return self.store.job_events(job_id, after=after)

    async def job_events_async(self, job_id: str, *, after: int = 0) -> list[JobEvent]:
        return await self.in_thread(self.store.job_events, job_id, after=after)

    def inbox(self, job_id: str) -> list[dict[str, Any]]:
        """The deliveries from outside (webhooks) that named ``job_id``, oldest first, each
        with its source, delivery id, kind and what became of it."""
        self.refuse_in_loop("inbox")
        return self.store.inbox(job_id)

    def extend_deadline(self, job_id: str, deadline: str | float) -> Job | None:
        """Move a started job's deadline to ``deadline`` (``"30m"``) from now; None when the
        job has finished (nothing changes). :class:`~longcall.errors.JobNotFound` for an
        unknown id."""
        self.refuse_in_loop("extend_deadline")
        return self.store.extend(job_id, parse_duration(deadline))

    # -- conversations ------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session_turn(
        self, session_id: str, *, app_name: str, user_id: str, kind: str = "turn"
    ) -> AsyncIterator[str]:
        """Hold the session's lease for a run: waits while a resume (or another turn) runs.

        The session is ``app_name``'s and ``user_id``'s (as google-adk names it): the lease
        is the one deliveries of that app's jobs into it take. It is renewed while the block
        runs and released at its end, so resumes of this session wait for the turn, in this
        process or any other.
        """
        session = SessionKey(app_name, user_id, session_id)
        async with self.jobs.session_turn(session, kind=kind) as holder:
            yield holder

    async def run_turn_async(
        self, runner: AgentRunner, *, user_id: str, session_id: str, text: str
    ) -> list[AgentEvent]:
        """A user's turn: takes the session lease, runs the agent, attaches long-running calls."""
        observer = self.call_observer(
            app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        events = []
        async with self.session_turn(session_id, app_name=runner.app_name, user_id=user_id):
            async for event in runner.run(
                user_id=user_id, session_id=session_id, message=Message(text=text)
            ):
                await observer.observe(event)
                events.append(event)
        return events

    def run_turn(
        self, runner: AgentRunner, *, user_id: str, session_id: str, text: str
    ) -> list[AgentEvent]:
        self.refuse_in_loop("run_turn")
        return asyncio.run(
            self.run_turn_async(runner, user_id=user_id, session_id=session_id, text=text)
        )

    # -- workflows ----------------------------------------------------------------------

    # A task whose last parameter is the TaskContext is called without it (the run supplies
    # it); see TaskDecorator.
    @overload
    def task(self, func: Callable[[TaskContext], T], /) -> Task[[], T]: ...

    @overload
    def task(self, func: Callable[[A1, TaskContext], T], /) -> Task[[A1], T]: ...

    @overload
    def task(self, func: Callable[[A1, A2, TaskContext], T], /) -> Task[[A1, A2], T]: ...

    @overload
    def task(self, func: Callable[[A1, A2, A3, TaskContext], T], /) -> Task[[A1, A2, A3], T]: ...

    @overload
    def task(self, func: Callable[P, T], /) -> Task[P, T]: ...

    @overload
    def task(
        self, func: None = None, /, *, name: str | None = None, retry: RetryPolicy | None = None
    ) -> TaskDecorator: ...

    def task(
        self,
        func: Callable[P, T] | None = None,
        /,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Task[P, T] | TaskDecorator:
        """Make a function a task: each call inside a run is checkpointed before it returns.

        The task keeps the function's type: called with its parameters, it returns what the
        function returns (an async task, a coroutine to await)."""
        return self.workflows.task(func, name=name, retry=retry)

    @overload
    def workflow(self, func: Callable[P, Coroutine[Any, Any, T]], /) -> Workflow[P, T]: ...

    @overload
    def workflow(self, func: Callable[P, T], /) -> Workflow[P, T]: ...

    @overload
    def workflow(
        self,
        workflow_id: str | None = None,
        /,
        *,
        state: Mapping[str, Reducer] | None = None,
        validator: StateSchemaValidator | None = None,
        version: str = "1",
    ) -> WorkflowDecorator: ...

    def workflow(
        self,
        workflow_id: str | Callable[..., Any] | None = None,
        /,
        *,
        state: Mapping[str, Reducer] | None = None,
        validator: StateSchemaValidator | None = None,
        version: str = "1",
    ) -> Workflow[..., Any] | WorkflowDecorator:
        """Register a workflow under ``workflow_id`` (the function's name by default).

        ``Workflow[P, R]``: ``R`` is what the body returns (awaited, for an async one);
        ``workflow.result_of(run)`` reads a completed run's result as an ``R``. Its runs
        record ``version``, and only workers that register that version execute them
        (docs/workflows.md, "Versions")."""
        return self.workflows.workflow(
            workflow_id, state=state, validator=validator, version=version
        )

    def run_workflow(
        self, workflow: str | Workflow[..., Any], input: Any = None, *, run_id: str | None = None
    ) -> Run:
        """Start a run and execute it here until it completes, fails or waits for input
        (:meth:`submit_run` queues it for a worker instead).

        With a ``run_id`` that exists already, nothing new starts: that run is returned, its
        ``created`` False.
        """
        self.refuse_in_loop("run_workflow")
        run, created = self.workflows.start(workflow, input, run_id=run_id)
        if not created:
            return run
        return dataclasses.replace(self.workflows.execute((run, [], {})), created=True)

    async def run_workflow_async(
        self, workflow: str | Workflow[..., Any], input: Any = None, *, run_id: str | None = None
    ) -> Run:
        run, created = await self.in_thread(self.workflows.start, workflow, input, run_id=run_id)
        if not created:
            return run
        return dataclasses.replace(await self.workflows.execute_async((run, [], {})), created=True)

    def answer(self, run_id: str, answers: Mapping[str, Any]) -> Run:
        """Answer a waiting run's questions by key and execute it here, from the top, as
        :meth:`run_workflow` does (:meth:`submit_answers` leaves it to a worker instead).

        Raises :class:`~longcall.errors.InvalidAnswer` (the run stays waiting) for an answer
        of the wrong type, and before anything is stored or executed for a key the run has not
        asked (unless it is answered ahead, see :meth:`Workflows.check_answers`) or one
        already answered; :class:`~longcall.errors.RunStateError` for a run not waiting, or
        one of a named queue (only its workers execute it, within the queue's limits).
        """
        self.refuse_in_loop("answer")
        run = self.workflows.execute(self.workflows.take(run_id, answers))
        self.workflows.wrong_answers(run, answers)
        return run

    async def answer_async(self, run_id: str, answers: Mapping[str, Any]) -> Run:
        taken = await self.in_thread(self.workflows.take, run_id, answers)
        run = await self.workflows.execute_async(taken)
        await self.in_thread(self.workflows.wrong_answers, run, answers)
        return run

    def resume(self, run_id: str, values: Mapping[str, Any]) -> Run:
        """Deprecated name of :meth:`answer`."""
        deprecated("App.resume", "App.answer")
        return self.answer(run_id, values)

    async def resume_async(self, run_id: str, values: Mapping[str, Any]) -> Run:
        """Deprecated name of :meth:`answer_async`."""
        deprecated("App.resume_async", "App.answer_async")
        return await self.answer_async(run_id, values)

    def continue_run(self, run_id: str) -> Run:
        """Execute a queued run, or one whose holder died (its lease ran out), from the top.

        A run waiting for input simply runs to the same interrupt again. A run of a named
        queue raises :class:`~longcall.errors.RunStateError`: a worker of its queue executes it.
        """
        self.refuse_in_loop("continue_run")
        return self.workflows.execute(self.workflows.take(run_id))

    async def continue_run_async(self, run_id: str) -> Run:
        taken = await self.in_thread(self.workflows.take, run_id)
        return await self.workflows.execute_async(taken)

    def submit_run(
        self,
        workflow: str | Workflow[..., Any],
        input: Any = None,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        max_retries: int = 0,
        timeout: str | float | None = None,
        user_id: str | None = None,
        job: JobHandle | None = None,
        cron_id: str | None = None,
        concurrency_key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        dedupe_id: str | None = None,
    ) -> Run:
        """Queue a background run for a worker (``app.run_worker()``, ``longcall worker``);
        :meth:`run_workflow` executes one here instead. Both return the :class:`Run`.

        The same ``idempotency_key`` (or ``run_id``) returns the run it made before, its
        ``created`` False. A failed attempt is retried ``max_retries`` times with backoff,
        resuming from its checkpoints; ``timeout`` bounds each attempt. Given a long-running tool's
        ``job``, the run does the job's work: its end completes (or fails) the job and the
        agent resumes; a tool body run again submits nothing new.

        ``queue`` submits to a named queue (:meth:`queue`), whose limits its claim keeps to;
        ``priority`` orders its runs (lower first, where the queue takes priorities); a
        ``dedupe_id`` already held by an active run of the queue raises
        :class:`~longcall.errors.DuplicateRun` and submits nothing.
        """
        wf = self.workflows.resolve(workflow)
        rank = self.queues.check_submit(queue, priority, dedupe_id)
        if job is not None:
            idempotency_key = idempotency_key or f"job:{job.id}"
        run, created = self.store.create_run(
            run_id or f"run-{uuid.uuid4().hex}",
            wf.workflow_id,
            wf.encode_input(input),
            user_id=user_id if job is None else user_id or job.ids.user_id,
            job_id=None if job is None else job.id,
            cron_id=cron_id,
            concurrency_key=concurrency_key,
            idempotency_key=idempotency_key,
            max_retries=max_retries,
            timeout_secs=None if timeout is None else parse_duration(timeout),
            version=wf.version,
            queue_name=queue,
            priority=rank,
            dedupe_id=dedupe_id,
        )
        return dataclasses.replace(run, created=created)

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        rate: str | None = None,
        priority: bool = False,
    ) -> Queue:
        """Declare a named queue for background runs and store its limits, which every
        worker enforces: ``concurrency`` runs of it at once across all workers,
        ``worker_concurrency`` on one worker, ``rate`` ("100/min") claims in any window of
        the period; ``priority=True`` lets submits order its runs. Only running runs count:
        a run waiting for input, a timer or a message holds no slot. Declaring a queue again
        (here or in another process) replaces its limits, with a warning when they differ.
        """
        return self.queues.declare(
            name,
            concurrency=concurrency,
            worker_concurrency=worker_concurrency,
            rate=rate,
            priority=priority,
        )

    def queue_stats(self) -> list[QueueStats]:
        """Every declared queue with its limits, its runs not finished by status, and the
        age of its oldest queued run."""
        return self.queues.stats()

    def submit_answers(self, run_id: str, answers: Mapping[str, Any]) -> Run:
        """Store answers to a waiting run's questions and queue it for a worker to continue,
        as :meth:`submit_run` does (:meth:`answer` executes it here instead).

        A key the run has not asked or one already answered raises
        :class:`~longcall.errors.InvalidAnswer` and queues nothing (as :meth:`answer`). An
        answer of the wrong type is found where the run executes: the run waits again, with
        the error on its interrupt (``app.get_run(run_id).pending``).
        """
        return self.store.queue_answered(
            run_id,
            dict(answers),
            lambda run, known: self.workflows.check_answers(run, known, answers),
        )

    def answer_run(self, run_id: str, values: Mapping[str, Any]) -> Run:
        """Deprecated name of :meth:`submit_answers`."""
        deprecated("App.answer_run", "App.submit_answers")
        return self.submit_answers(run_id, values)

    def run_worker(self, **options: Unpack[RunWorkerOptions]) -> RunWorker:
        """A loop that claims and executes background runs: ``await worker.run(stop)``."""
        return RunWorker(self.workflows, **options)

    def get_run(self, run_id: str) -> RunDetails:
        """The run with its checkpoints, interrupts and events."""
        return self.workflows.details(run_id)

    def run_history(self, run_id: str) -> list[HistoryEntry]:
        """The run's steps (its checkpoints, in order), each with its output and the state
        after it: what to pick a step to :meth:`fork_run` from. See
        :mod:`longcall.workflows.forks` for what counts as a step."""
        return forks.history(self.workflows, run_id)

    async def run_history_async(self, run_id: str) -> list[HistoryEntry]:
        return await self.in_thread(self.run_history, run_id)

    def fork_run(self, run_id: str, *, from_step: int, input: Any = None) -> Run:
        """Queue a new run of the run's workflow that reuses the recorded results of steps 1
        … ``from_step``-1 and executes from ``from_step`` on with the code workers have now;
        ``input`` replaces the original's (None keeps it). The new run has the original's
        owner, records ``forked_from`` and ``forked_step``, and is returned queued. Any run
        can be forked, finished or not (a running one: the steps committed so far).

        :class:`~longcall.errors.RunNotFound`, :class:`~longcall.errors.WorkflowNotFound`
        (not registered here), or :class:`~longcall.errors.InvalidValue` (a step out of
        range, an input the workflow refuses), and nothing is created.
        """
        return forks.fork(self.workflows, run_id, from_step=from_step, input=input)

    async def fork_run_async(self, run_id: str, *, from_step: int, input: Any = None) -> Run:
        return await self.in_thread(self.fork_run, run_id, from_step=from_step, input=input)

    def cancel_run(self, run_id: str) -> Run:
        """Cancel a run: at once if queued or waiting, at its next task call if running."""
        return self.request_run_cancel(run_id) or self.store.get_run(run_id)

    def send(
        self, run_id: str, topic: str, message: Any, *, idempotency_key: str | None = None
    ) -> SentMessage:
        """Send ``message`` (JSON data) to the run's ``ctx.recv(topic)``: kept until the run
        receives it, exactly once per ``idempotency_key``, in order per topic; a run waiting
        for it wakes. RunNotFound, RunStateError (the run has finished) or InvalidValue (a bad
        topic, key or message), and nothing is stored."""
        return messages.send(self.runtime, run_id, topic, message, idempotency_key=idempotency_key)

    async def send_async(
        self, run_id: str, topic: str, message: Any, *, idempotency_key: str | None = None
    ) -> SentMessage:
        return await self.in_thread(
            self.send, run_id, topic, message, idempotency_key=idempotency_key
        )

    def get_event(self, run_id: str, key: str, *, wait: float | str = 0) -> Any:
        """The latest value the run published with ``ctx.set_event(key, ...)``, waiting up to
        ``wait`` (seconds, or ``"30s"``) for a first one; None if there is none by then."""
        self.refuse_in_loop("get_event")
        return messages.get_event(self.runtime, run_id, key, wait=wait)

    async def get_event_async(self, run_id: str, key: str, *, wait: float | str = 0) -> Any:
        return await self.in_thread(messages.get_event, self.runtime, run_id, key, wait=wait)

    def read_stream(
        self, run_id: str, key: str, *, after: int | None = None, timeout: float | None = None
    ) -> Iterator[StreamItem]:
        """The items the run wrote with ``ctx.stream(key, ...)``, from the start (or after
        the seq ``after``), live: it blocks for the next one and stops at the stream's end
        (``ctx.close_stream``, or the run finished). Resume with ``after=item.seq``.
        TimeoutError when ``timeout`` seconds pass without an item; RunNotFound, or
        InvalidValue for a bad run id or key, before anything is read."""
        self.refuse_in_loop("read_stream")
        return streams.read(self.runtime, run_id, key, after=after, timeout=timeout)

    def read_stream_async(
        self, run_id: str, key: str, *, after: int | None = None, timeout: float | None = None
    ) -> AsyncIterator[StreamItem]:
        """``async for item in app.read_stream_async(run_id, key)``: :meth:`read_stream`."""
        return streams.read_async(self.runtime, run_id, key, after=after, timeout=timeout)

    def stream_items(
        self, run_id: str, key: str, *, after: int = 0, limit: int = 500
    ) -> tuple[list[StreamItem], bool]:
        """One look at a stream: its items after ``after`` now, and whether it has ended."""
        return self.store.stream_items(run_id, key, after=after, limit=limit)

    def request_run_cancel(self, run_id: str) -> Run | None:
        """:meth:`cancel_run`, returning the run only when this call changed it (None: it
        had ended, or its cancel was asked already)."""
        return self.store.request_run_cancel(run_id)

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow_id: str | None = None,
        user_id: str | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
        version: str | None = None,
    ) -> list[Run]:
        """Runs, newest first; ``before`` is the (created_at, run_id) of a page's last run;
        ``version``: only runs started by that version of their workflow."""
        return self.store.list_runs(
            status=status,
            workflow_id=workflow_id,
            user_id=user_id,
            before=before,
            limit=limit,
            version=None if version is None else checked_version(version),
        )

    def run_versions(
        self, workflow_id: str | None = None, *, user_id: str | None = None
    ) -> list[RunVersion]:
        """Per workflow and version, its runs not finished (by status; with ``user_id``,
        only that user's): a version missing here has drained, and workers that register
        only it can go."""
        return self.store.run_versions(workflow_id=workflow_id, user_id=user_id)

    def run_event_log(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        """The run's events after ``after`` as they are now (:meth:`run_events` follows)."""
        return self.store.run_events(run_id, after=after)

    def run_events(
        self, run_id: str, *, after: int = 0, follow: bool = True
    ) -> AsyncIterator[RunEvent]:
        """``async for event in app.run_events(run_id)``: the event log, live while it runs."""
        return self.workflows.events(run_id, after=after, follow=follow)

    # -- background loops ---------------------------------------------------------------

    def deliverer(self, runner: AgentRunner, **options: Unpack[DelivererOptions]) -> Deliverer:
        """The loop that hands finished jobs back to ``runner``'s sessions (the worker runs
        one; this is for running it alone)."""
        return Deliverer(self.jobs, runner, **options)

    def resumer(self, runner: AgentRunner, **options: Unpack[DelivererOptions]) -> Deliverer:
        """Deprecated name of :meth:`deliverer`."""
        deprecated("App.resumer", "App.deliverer")
        return self.deliverer(runner, **options)

    def sweeper(self, **options: Unpack[SweeperOptions]) -> Sweeper:
        return Sweeper(self.runtime, **options)

    def prune(self, retention: Retention | None = None, *, dry_run: bool = False) -> dict[str, int]:
        """Remove finished work older than ``retention`` (30 days of each kind unless told),
        now, in small batches: what the worker does every minute. How many records went per
        kind (jobs, runs, inbox, early_results); with ``dry_run``, how many would go."""
        self.refuse_in_loop("prune")
        pruner = Pruner(self.runtime, Retention() if retention is None else retention)
        return pruner.prune(dry_run=dry_run)

    def worker(
        self,
        runner: AgentRunner | None = None,
        *,
        runners: Sequence[AgentRunner] = (),
        **options: Unpack[WorkerOptions],
    ) -> Worker:
        """The worker loops: deliveries to ``runner`` (or to each of ``runners``, one per ADK
        app: each app's jobs go to its own runner), deadlines, submissions and, when
        workflows are registered, background runs."""
        return Worker(self.jobs, self.workflows, self.crons, runner, runners=runners, **options)

    def call_observer(self, *, app_name: str | None, user_id: str, session_id: str) -> CallObserver:
        """A :class:`CallObserver` for one run into ``session_id``: joins the jobs of the
        long-running calls it sees to the session and call."""
        return CallObserver(
            self.jobs.joins, app_name=app_name, user_id=user_id, session_id=session_id
        )


def _error_body(error: str | dict[str, Any]) -> dict[str, Any]:
    return dict(error) if isinstance(error, dict) else {"error": str(error)}


def _cancel_body(reason: str | None) -> dict[str, Any]:
    return {"message": reason or "The job was cancelled."}
