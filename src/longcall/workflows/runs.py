"""Workflows registered on an App, and running them: start, answer, continue, inspect, cancel.

``app.run_workflow`` executes in the calling thread (or event loop) until the run completes,
fails or waits for input; ``app.answer`` supplies answers and executes again from the top,
skipping every task call that has a checkpoint. Background runs on workers build on the same
:meth:`Workflows.execute`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

import pydantic
from pydantic_core import to_jsonable_python

from longcall.core.backoff import exponential
from longcall.core.jobs import parse_duration
from longcall.core.observed import RunEnded
from longcall.core.runs import Interrupt, Run, RunEvent, RunStatus, Step
from longcall.errors import (
    InvalidAnswer,
    NonDeterminismError,
    RunStateError,
    WorkflowError,
)
from longcall.logs import about
from longcall.runtime import Runtime
from longcall.store._run_children import CHILD_TOPIC
from longcall.store.runs import CANCELLED, Checkpoint, Held, NextClaim
from longcall.workflows._checkpoints import LateCheckpoints
from longcall.workflows._leases import Heartbeat
from longcall.workflows._spans import ended, run_span
from longcall.workflows._versions import DEFAULT_VERSION, checked_version
from longcall.workflows.answers import check_answers, key_number
from longcall.workflows.children import start_child
from longcall.workflows.engine import (
    Cancelled,
    Execution,
    Lost,
    RetryPolicy,
    Sleep,
    Suspend,
    Task,
    TaskContext,
    _resolve,
    context_param,
    run_body,
    run_body_async,
)
from longcall.workflows.state import Reducer, State, StateSchemaValidator

log = logging.getLogger("longcall.workflows")

P = ParamSpec("P")
R = TypeVar("R")


class Workflow(Generic[P, R]):
    """A registered workflow: its body, the type of its input and output, its state fields.

    ``Workflow[P, R]``: the body's parameters, and what a completed run of it returns (what
    an async body returns once awaited); :meth:`result_of` reads that from a run.
    """

    def __init__(
        self,
        func: Callable[P, R] | Callable[P, Coroutine[Any, Any, R]],
        workflow_id: str,
        *,
        state: Mapping[str, Reducer] | None,
        validator: StateSchemaValidator | None,
        version: str = DEFAULT_VERSION,
    ) -> None:
        self.func: Callable[..., Any] = func
        self.workflow_id = workflow_id
        self.version = checked_version(version)
        self.state_fields = dict(state or {})
        self.validator = validator
        self.is_async = inspect.iscoroutinefunction(func)
        signature = inspect.signature(func)
        params = list(signature.parameters.values())
        self.context_param = context_param(signature)
        inputs = [p for p in params if p.name != self.context_param]
        if len(inputs) > 1:
            raise WorkflowError(
                f"workflow {workflow_id!r} takes one input (a model or a dict) and the "
                f"context; it declares {[p.name for p in inputs]}"
            )
        self.input_param = inputs[0].name if inputs else None
        self.input_adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
            _resolve(func, self.input_param) if self.input_param else Any
        )
        self.output_adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
            _resolve(func, "return")
        )
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", workflow_id)
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<longcall workflow {self.workflow_id!r}>"

    def result_of(self, run: Run) -> R:
        """A completed run's result as the type the workflow returns (``run.result`` is its
        JSON form: a model comes back as a dict there). Raises :class:`RunStateError` for a
        run of another workflow or one not completed: it has no result to read."""
        if run.workflow_id != self.workflow_id:
            raise RunStateError(
                f"run {run.run_id!r} is a run of {run.workflow_id!r}, not of {self.workflow_id!r}"
            )
        if run.status is not RunStatus.COMPLETED:
            raise RunStateError(
                f"run {run.run_id!r} is {run.status.value}: only a completed run has a result"
            )
        result: R = self.output_adapter.validate_python(run.result)
        return result

    def encode_input(self, value: Any) -> Any:
        """The input as JSON data, after checking it against the input's type."""
        return to_jsonable_python(self.input_adapter.validate_python(value))

    def arguments(self, stored_input: Any, ctx: TaskContext) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.input_param is not None:
            kwargs[self.input_param] = self.input_adapter.validate_python(stored_input)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs


@dataclass(frozen=True, slots=True)
class RunDetails:
    """A run with everything recorded about it: ``app.get_run(run_id)``."""

    run: Run
    steps: list[Step]
    interrupts: list[Interrupt]
    events: list[RunEvent]
    # The runs it started with ``ctx.start_child``, oldest first.
    children: list[Run] = field(default_factory=list)

    @property
    def status(self) -> RunStatus:
        return self.run.status

    @property
    def pending(self) -> list[Interrupt]:
        """The questions the run waits on (asked, not answered or answered wrongly)."""
        if self.run.status is not RunStatus.WAITING_INPUT:
            return []
        return [i for i in self.interrupts if i.asked_at is not None and not i.answered]


class WorkflowDecorator(Protocol):
    """What ``@app.workflow("id", ...)`` returns: it registers a sync or an async body."""

    @overload
    def __call__(self, func: Callable[P, Coroutine[Any, Any, R]], /) -> Workflow[P, R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> Workflow[P, R]: ...


A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")


class TaskDecorator(Protocol):
    """What ``@app.task(name=..., retry=...)`` returns.

    A task whose last parameter is the :class:`TaskContext` is called without it (the run
    supplies it): typed so for up to three parameters before it, which lose their names.
    """

    @overload
    def __call__(self, func: Callable[[TaskContext], R], /) -> Task[[], R]: ...

    @overload
    def __call__(self, func: Callable[[A1, TaskContext], R], /) -> Task[[A1], R]: ...

    @overload
    def __call__(self, func: Callable[[A1, A2, TaskContext], R], /) -> Task[[A1, A2], R]: ...

    @overload
    def __call__(
        self, func: Callable[[A1, A2, A3, TaskContext], R], /
    ) -> Task[[A1, A2, A3], R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> Task[P, R]: ...


# Failures a retry would only repeat.
NOT_RETRIED = frozenset({"NonDeterminismError", "WorkflowNotFound"})


def _error(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


class Workflows:
    """The workflows and tasks of one App, and the runs of them."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        lease: float,
        retry_base: float = 1.0,
        retry_cap: float = 300.0,
        checkpoint_delay: float = 0.02,
    ) -> None:
        self.runtime = runtime
        self.lease = lease
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.registry: dict[str, Workflow[..., Any]] = {}
        self.tasks: dict[str, Task[..., Any]] = {}
        self.heartbeat = Heartbeat(runtime.store, lease)
        # Sync runs hold their last checkpoint back for their end to write, up to this long
        # (where the store can write both in one statement); 0 writes each at once.
        self.late_checkpoints = LateCheckpoints(checkpoint_delay)
        # Told the wake-up time (the database's clock) of each run put to sleep here: a
        # worker in this process claims it then, not at its next poll.
        self.sleep_listeners: list[Callable[[float], None]] = []

    # -- registration ---------------------------------------------------------------------

    def task(
        self,
        func: Callable[P, R] | None = None,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Task[P, R] | TaskDecorator:
        def register(f: Callable[P, R]) -> Task[P, R]:
            task = Task(f, name=name or f.__qualname__, retry=retry or RetryPolicy())
            self.tasks[task.name] = task
            return task

        return register(func) if func is not None else register  # type: ignore[return-value]

    def workflow(
        self,
        workflow_id: str | Callable[..., Any] | None = None,
        *,
        state: Mapping[str, Reducer] | None = None,
        validator: StateSchemaValidator | None = None,
        version: str = DEFAULT_VERSION,
    ) -> Workflow[..., Any] | WorkflowDecorator:
        version = checked_version(version)  # refused at the decorator, before any body

        def register(f: Callable[..., Any], wid: str | None) -> Workflow[..., Any]:
            wf: Workflow[..., Any] = Workflow(
                f, wid or f.__name__, state=state, validator=validator, version=version
            )
            if wf.workflow_id in self.registry:
                raise WorkflowError(f"a workflow {wf.workflow_id!r} is already registered")
            self.registry[wf.workflow_id] = wf
            return wf

        if callable(workflow_id):
            return register(workflow_id, None)
        return lambda f: register(f, workflow_id)  # type: ignore[return-value]

    def registered(self) -> frozenset[tuple[str, str]]:
        """The (workflow id, version) pairs registered here: a worker claims runs of these."""
        return frozenset((wf.workflow_id, wf.version) for wf in self.registry.values())

    def check_version(self, run: Run) -> None:
        """Refuse to execute here a run started by another version of its workflow."""
        wf = self.registry.get(run.workflow_id)
        if wf is not None and wf.version != run.version:
            raise RunStateError(
                f"run {run.run_id!r} was started by version {run.version!r} of "
                f"{run.workflow_id!r}, and this app registers version {wf.version!r}: a "
                f"worker that registers version {run.version!r} executes it"
            )

    def resolve(self, workflow: str | Workflow[..., Any]) -> Workflow[..., Any]:
        if isinstance(workflow, Workflow):
            return workflow
        from longcall.errors import WorkflowNotFound

        try:
            return self.registry[workflow]
        except KeyError:
            raise WorkflowNotFound(workflow) from None

    # -- starting and executing -------------------------------------------------------------

    def start(
        self, workflow: str | Workflow[..., Any], input: Any = None, *, run_id: str | None = None
    ) -> tuple[Run, bool]:
        """Create a run held by this app, ready to execute here (the existing one if the id
        is taken: True when it was created)."""
        wf = self.resolve(workflow)
        return self.runtime.store.create_run(
            run_id or f"run-{uuid.uuid4().hex}",
            wf.workflow_id,
            wf.encode_input(input),
            holder=self.runtime.holder,
            lease=self.lease,
            version=wf.version,
        )

    def _execution(self, wf: Workflow[..., Any], held: Held) -> Execution:
        run, steps, interrupts = held
        assert run.holder is not None, "a run executes only where it is held"
        exe = Execution(
            self.runtime,
            self.late_checkpoints,
            run,
            holder=run.holder,
            lease=self.lease,
            state=State(wf.state_fields),
            steps=steps,
            interrupts=interrupts,
            is_async=wf.is_async,
            holds_back=(
                not wf.is_async
                and self.late_checkpoints.delay > 0
                and self.runtime.store.merges_checkpoints
            ),
        )
        exe.registry = self.registry
        exe.child_starter = start_child
        return exe

    def execute(self, held: Held, *, then_claim: NextClaim | None = None) -> Run:
        """Execute a run this app holds, in this thread, to its end or its next interrupt;
        a worker passes ``then_claim`` to claim its next runs as this one ends."""
        wf = self.registry.get(held[0].workflow_id)
        if wf is None:
            return self._unregistered(held[0])
        if held[0].cancel_requested:  # taken over from a holder that died while cancelling
            return self.end(held[0], RunStatus.CANCELLED, error=CANCELLED)
        exe = self._execution(wf, held)
        self.heartbeat.hold(exe)
        try:
            # An async workflow called from sync code gets an event loop of its own.
            body = asyncio.run(self._body_async(wf, exe)) if wf.is_async else self._body(wf, exe)
            outcome = body
        finally:
            self.heartbeat.release(exe)
        return self._end(wf, exe, outcome, then_claim)

    async def execute_async(self, held: Held, *, then_claim: NextClaim | None = None) -> Run:
        wf = self.registry.get(held[0].workflow_id)
        if wf is None or held[0].cancel_requested or not wf.is_async:
            return await self.runtime.in_thread(self.execute, held, then_claim=then_claim)
        exe = self._execution(wf, held)
        self.heartbeat.hold(exe)
        try:
            outcome = await self._body_async(wf, exe)
        finally:
            self.heartbeat.release(exe)
        return await self.runtime.in_thread(self._end, wf, exe, outcome, then_claim)

    def _body(self, wf: Workflow[..., Any], exe: Execution) -> tuple[RunStatus, Any, Any]:
        with run_span(self.runtime.telemetry, exe.run) as span:
            try:
                kwargs = wf.arguments(exe.run.input, exe.ctx)
                outcome = self._finished(wf, exe, run_body(wf.func, exe, (), kwargs))
            except BaseException as exc:
                outcome = self._stopped(exe, exc)
            return ended(self.runtime.telemetry, span, outcome)

    async def _body_async(
        self, wf: Workflow[..., Any], exe: Execution
    ) -> tuple[RunStatus, Any, Any]:
        with run_span(self.runtime.telemetry, exe.run) as span:
            try:
                kwargs = wf.arguments(exe.run.input, exe.ctx)
                outcome = self._finished(wf, exe, await run_body_async(wf.func, exe, (), kwargs))
            except BaseException as exc:
                outcome = self._stopped(exe, exc)
            return ended(self.runtime.telemetry, span, outcome)

    def _finished(
        self, wf: Workflow[..., Any], exe: Execution, value: Any
    ) -> tuple[RunStatus, Any, Any]:
        if exe.divergence is not None:  # caught by the workflow: it still fails the run
            return RunStatus.FAILED, None, _error(exe.divergence)
        output = to_jsonable_python(wf.output_adapter.validate_python(value))
        if wf.validator is not None:
            wf.validator.validate(exe.state.snapshot())
        return RunStatus.COMPLETED, output, None

    def _stopped(self, exe: Execution, exc: BaseException) -> tuple[RunStatus, Any, Any]:
        if exe.divergence is not None:
            return RunStatus.FAILED, None, _error(exe.divergence)
        if isinstance(exc, Suspend):
            return RunStatus.WAITING_INPUT, None, None
        if isinstance(exc, Sleep):
            exe.wake_at, exe.recv_topic = exc.wake_at, exc.topic
            return RunStatus.SLEEPING, None, None
        if isinstance(exc, Cancelled):
            return RunStatus.CANCELLED, None, CANCELLED
        if isinstance(exc, Lost):
            return RunStatus.RUNNING, None, None
        if isinstance(exc, Exception):
            log.info("run %s failed: %s", exe.run.run_id, exc, extra=about(run_id=exe.run.run_id))
            return RunStatus.FAILED, None, _error(exc)
        raise exc  # KeyboardInterrupt, SystemExit: the lease runs out, another worker resumes

    def _end(
        self,
        wf: Workflow[..., Any],
        exe: Execution,
        outcome: tuple[RunStatus, Any, Any],
        then_claim: NextClaim | None = None,
    ) -> Run:
        status, result, error = outcome
        store = self.runtime.store
        step = exe.take_held_back()
        if status is RunStatus.RUNNING or exe.lost:  # not ours: its checkpoint is dropped too
            return store.get_run(exe.run.run_id)
        return self.end(
            exe.run,
            status,
            state=exe.state.snapshot(),
            result=result,
            error=error,
            asked=exe.asked,
            consumed=exe.consumed,
            then_claim=then_claim,
            step=step,
            wake_at=exe.wake_at,
            recv_topic=exe.recv_topic,
        )

    def end(
        self,
        run: Run,
        status: RunStatus,
        *,
        state: dict[str, Any] | None = None,
        result: Any = None,
        error: dict[str, Any] | None = None,
        asked: Sequence[tuple[str, str, dict[str, Any] | None, Any]] = (),
        consumed: Sequence[str] = (),
        then_claim: NextClaim | None = None,
        step: Checkpoint | None = None,
        wake_at: float | None = None,
        recv_topic: str | None = None,
    ) -> Run:
        """Record how an execution ended, with its last checkpoint (``step``) if it held it
        back; a failed attempt with retries left goes back to the queue instead (resuming
        from its checkpoints). A ``SLEEPING`` run is queued again for ``wake_at``."""
        store = self.runtime.store
        assert run.holder is not None
        if error is not None:
            error = {**error, "attempt": run.attempts + 1}
        if (
            status is RunStatus.FAILED
            and run.attempts < run.max_retries
            and error is not None
            and error["type"] not in NOT_RETRIED
        ):
            retried = store.retry_run(
                run.run_id,
                run.holder,
                error=error,
                delay=self.backoff(run.attempts + 1),
                step=step,
            )
            if retried is not None:
                self.runtime.observers.tell(RunEnded(run.workflow_id, "retrying"))
            return retried or store.get_run(run.run_id)
        asleep = status is RunStatus.SLEEPING
        ended = store.end_run(
            run.run_id,
            run.holder,
            RunStatus.QUEUED if asleep else status,
            state=run.state if state is None else state,
            result=result,
            error=error,
            asked=asked,
            consumed=consumed,
            # a child's end wakes its parent in the end's transaction (not a single statement)
            for_job=run.job_id is not None or run.parent_run_id is not None,
            then_claim=then_claim,
            step=step,
            wake_at=wake_at if asleep else None,
            recv_topic=recv_topic if asleep else None,
        )
        if ended is not None:
            self.runtime.observers.tell(RunEnded(run.workflow_id, status.value))
            # A message sent while it was suspending (a child's end it has looked at already).
            if asleep and recv_topic is not None and not recv_topic.startswith(CHILD_TOPIC):
                store.wake_for_message(run.run_id, recv_topic)
            if asleep and wake_at is not None:
                for listener in self.sleep_listeners:  # a worker here wakes it on time
                    listener(wake_at)
        return ended or store.get_run(run.run_id)

    def backoff(self, attempt: int) -> float:
        """About base, 2·base, 4·base … up to the cap, each drawn between half and all."""
        return exponential(attempt, base=self.retry_base, cap=self.retry_cap)

    def _unregistered(self, run: Run) -> Run:
        error = {
            "type": "WorkflowNotFound",
            "message": f"no workflow {run.workflow_id!r} is registered where the run executed",
        }
        return self.end(run, RunStatus.FAILED, error=error)

    # -- resuming ------------------------------------------------------------------------------

    # Refuse answers that cannot be taken: see :func:`longcall.workflows.answers.check_answers`.
    check_answers = staticmethod(check_answers)

    def wrong_answers(self, run: Run, values: Mapping[str, Any]) -> None:
        """After an execution: raise InvalidAnswer for answers the run found of the wrong type."""
        if run.status is not RunStatus.WAITING_INPUT:
            return
        interrupts = self.runtime.store.run_interrupts(run.run_id)
        problems = [
            {"key": key, "path": p["path"], "message": p["message"]}
            for key in sorted(values, key=key_number)
            if key in interrupts and interrupts[key].error
            for p in interrupts[key].error
        ]
        if problems:
            raise InvalidAnswer(run.run_id, problems)

    def take(self, run_id: str, answers: Mapping[str, Any] | None = None) -> Held:
        """Hold the run to execute it here, with its record; with ``answers``, only a run
        waiting for input, and the answers stored in the same transaction."""
        values = dict(answers) if answers is not None else None

        def check(run: Run, known: dict[str, Interrupt]) -> None:
            self.check_version(run)
            if run.queue_name is not None:
                # Executed here, the run would count against none of its queue's limits.
                raise RunStateError(
                    f"run {run_id!r} is in queue {run.queue_name!r}, whose limits only its "
                    "workers keep: "
                    + (
                        "answer it with submit_answers, and a worker continues it"
                        if values is not None
                        else "a worker of that queue executes it"
                    )
                )
            if values is not None:
                self.check_answers(run, known, values)

        held = self.runtime.store.hold_run(
            run_id, self.runtime.holder, lease=self.lease, answers=values, check=check
        )
        if held is None:
            run = self.runtime.store.get_run(run_id)
            raise RunStateError(
                f"run {run_id!r} cannot be executed here: it is {run.status.value}"
                + (f", held by {run.holder}" if run.holder else "")
                + (", cancelling" if run.cancel_requested else "")
            )
        return held

    # -- reading -------------------------------------------------------------------------------

    def details(self, run_id: str) -> RunDetails:
        store = self.runtime.store
        run = store.get_run(run_id)
        interrupts = sorted(store.run_interrupts(run_id).values(), key=lambda i: key_number(i.key))
        return RunDetails(
            run,
            store.run_steps(run_id),
            interrupts,
            store.run_events(run_id),
            store.child_runs(run_id),
        )

    async def events(
        self, run_id: str, *, after: int = 0, follow: bool = True, poll: float | str = "200ms"
    ) -> AsyncIterator[RunEvent]:
        """The run's events from ``after`` on; with ``follow``, live until the run stops."""
        interval = parse_duration(poll)
        while True:
            batch = await self.runtime.in_thread(self.runtime.store.run_events, run_id, after=after)
            for event in batch:
                after = event.seq
                yield event
            if not follow:
                return
            if not batch:
                run = await self.runtime.in_thread(self.runtime.store.get_run, run_id)
                if run.status.terminal or run.status is RunStatus.WAITING_INPUT:
                    for event in await self.runtime.in_thread(
                        self.runtime.store.run_events, run_id, after=after
                    ):
                        yield event
                    return
                await asyncio.sleep(interval)


__all__ = ["NonDeterminismError", "RunDetails", "Workflow", "Workflows"]
