"""Executing a run: task checkpoints, replay on resume, interrupts, emits, cancellation.

A run executes its workflow body from the top every time (first run, resume, recovery).
Each task call takes the next *position* when it is called; a position with a checkpoint is
skipped and answers with the recorded result, so only work that never finished runs again.
A checkpoint is committed before the call returns, or, for a sync run on PostgreSQL, held
back to be committed with what the run records next, its end most often (see checkpoints.py);
either way before the next task call starts. A recorded call that does not match the
new one (another task, other arguments) is a :class:`NonDeterminismError` and fails the run,
even if the workflow catches it: going on would hand it a result meant for another call.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import datetime
import hashlib
import inspect
import json
import logging
import re
import threading
import time
import typing
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

import pydantic
from pydantic_core import to_jsonable_python

from longcall.core.backoff import exponential_ceiling, jittered
from longcall.core.jobs import parse_duration
from longcall.core.observed import TaskDone
from longcall.core.runs import Interrupt, Run, Step
from longcall.errors import NonDeterminismError, TaskError, WorkflowError
from longcall.runtime import Runtime
from longcall.store.runs import Checkpoint
from longcall.workflows import streams as _streams
from longcall.workflows._checkpoints import LateCheckpoints
from longcall.workflows._spans import task_span
from longcall.workflows._timers import checked_name, sleep_seconds, wake_time
from longcall.workflows._versions import MARKER as PATCH_MARKER
from longcall.workflows._versions import checked_change
from longcall.workflows.state import State

log = logging.getLogger("longcall.workflows")

KEY = re.compile(r"^interrupt-[1-9][0-9]*$")

P = ParamSpec("P")
R = TypeVar("R")


class Suspend(BaseException):
    """The run needs input: raised by ``ctx.interrupt`` and caught by the engine.

    A ``BaseException``, so a workflow's ``except Exception`` cannot swallow it.
    """

    def __init__(self, key: str) -> None:
        super().__init__(f"the run waits for {key}")
        self.key = key


class Sleep(BaseException):
    """The run sleeps until ``wake_at`` (the database's clock), or, with ``topic``, until a
    message of that topic comes (``wake_at`` None: however long): raised by ``ctx.sleep`` and
    ``ctx.recv``."""

    def __init__(self, wake_at: float | None, topic: str | None = None) -> None:
        super().__init__(f"the run sleeps until {wake_at} (or a message of {topic!r})")
        self.wake_at = wake_at
        self.topic = topic


class Cancelled(BaseException):
    """The run was asked to stop; raised at its next task call once it has been told."""


class Lost(BaseException):
    """Another worker took the run over (this one's lease ran out): stop without writing."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a failing task is tried, and how long to wait between tries.

    Waits grow from ``initial`` by ``multiplier`` up to ``maximum``; with ``jitter`` each is
    drawn between half and all of it, so retries of many runs do not move in step.
    """

    max_attempts: int = 1
    initial: float | str = "500ms"
    maximum: float | str = "30s"
    multiplier: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts is at least 1")
        if self.multiplier < 1:
            raise ValueError("multiplier is at least 1")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failure."""
        wait = exponential_ceiling(
            attempt,
            base=parse_duration(self.initial),
            cap=parse_duration(self.maximum),
            factor=self.multiplier,
        )
        return jittered(wait) if self.jitter else wait


@dataclass
class _Frame:
    """A task call in progress: its state changes stay here until it succeeds."""

    position: int
    attempt: int = 1
    emits: int = 0
    local: State | None = None
    updates: list[tuple[str, Any]] = field(default_factory=list)


_execution: contextvars.ContextVar[Execution | None] = contextvars.ContextVar(
    "longcall_execution", default=None
)
_frame: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar(
    "longcall_task_frame", default=None
)


def context_param(signature: inspect.Signature) -> str | None:
    """The parameter that asks for the :class:`TaskContext`, by its annotation."""
    names = ("TaskContext", "longcall.TaskContext", "workflows.TaskContext")
    for param in signature.parameters.values():
        if param.annotation is TaskContext or param.annotation in names:
            return param.name
    return None


def args_hash(arguments: dict[str, Any]) -> str:
    """A short, stable digest of a call's arguments (as JSON, keys sorted)."""
    text = json.dumps(to_jsonable_python(arguments), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class _Ready:
    """An awaitable that is already done: ``await ctx.interrupt(...)`` in async workflows."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.value
        yield  # pragma: no cover - makes this a generator


class TaskContext:
    """What a workflow (and a task that asks for it) sees of its run."""

    def __init__(self, execution: Execution) -> None:
        self._exe = execution
        self._writer: _streams.StreamWriter | None = None  # made at the first write

    @property
    def run_id(self) -> str:
        return self._exe.run.run_id

    @property
    def workflow_id(self) -> str:
        return self._exe.run.workflow_id

    @property
    def cancelled(self) -> bool:
        """True once the run has been asked to stop: finish up, the next task call ends it."""
        # A task call's checkpoint is what tells the run; one held back is written now.
        self._exe.write_held_back()
        return self._exe.cancel_seen

    def get(self, name: str, default: Any = None) -> Any:
        frame = _frame.get()
        if frame is not None and frame.local is not None:
            return frame.local.get(name, default)
        return self._exe.state.get(name, default)

    def set(self, name: str, update: Any) -> None:
        """Change a state field through its reducer (replace, append, merge, …)."""
        frame = _frame.get()
        if frame is None:
            self._exe.state.set(name, update)
            return
        # Inside a task the change waits for the task to succeed: a failed attempt leaves
        # nothing behind, and the checkpoint records exactly what the success changed.
        if frame.local is None:
            self._exe.state.take_changes()
            frame.local = copy.deepcopy(self._exe.state)
        frame.local.set(name, update)
        frame.updates.append((name, update))

    def emit(self, kind: str, data: Any = None) -> None:
        """Append to the run's durable event log (readable live with ``app.run_events``)."""
        exe = self._exe
        frame = _frame.get()
        if frame is None:
            count = exe.body_emits.get(exe.position, 0)
            exe.body_emits[exe.position] = count + 1
            origin = f"b{exe.position}.{count}"
        else:
            origin = f"t{frame.position}.a{frame.attempt}.{frame.emits}"
            frame.emits += 1
        exe.write_held_back()  # the log never shows what a lost checkpoint would run again
        exe.runtime.store.emit_run_event(exe.run.run_id, origin, kind, to_jsonable_python(data))

    def interrupt(self, prompt: str, *, schema: Any = None) -> Any:
        """The answer to ``prompt`` as ``schema`` (any type pydantic validates): the run
        suspends (``waiting_input``) until ``app.answer(run_id, {key: value})`` supplies it.

        Keys are ``interrupt-1``, ``interrupt-2``, … in the order the run asks. In an async
        workflow, ``await`` the result.
        """
        exe = self._exe
        if _frame.get() is not None:
            raise WorkflowError(
                "ctx.interrupt belongs in the workflow body: a task waiting for input would "
                "run again from its start when the answer comes"
            )
        exe.interrupts_asked += 1
        key = f"interrupt-{exe.interrupts_asked}"
        adapter = pydantic.TypeAdapter(schema if schema is not None else Any)
        json_schema = adapter.json_schema() if schema is not None else None
        record = exe.interrupts.get(key)
        if record is not None and record.supplied and record.error is None:
            try:
                value = adapter.validate_python(record.value)
            except pydantic.ValidationError as exc:
                problems = [
                    {"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
                    for e in exc.errors()
                ]
                exe.asked.append((key, prompt, json_schema, problems))
                raise Suspend(key) from None
            exe.consumed.append(key)
            exe.asked.append((key, prompt, json_schema, None))  # what was asked stays on record
            return _Ready(value) if exe.is_async else value
        exe.asked.append((key, prompt, json_schema, None))
        raise Suspend(key)

    def sleep(self, duration: float | str) -> Any:
        """Sleep ``duration`` (seconds, or ``"90s"``, ``"3d"``) on the database's clock.

        The run ends its execution now, holding no thread, connection or process, and any
        worker resumes it once the time has come; its wake-up time is recorded first, so a
        replay sleeps only what is left of it. In an async workflow, ``await`` the result.
        """
        return self._timer("sleep", sleep_seconds(duration), None)

    def wait_until(self, when: datetime.datetime) -> Any:
        """Sleep until ``when`` (a timezone-aware datetime); like :meth:`sleep`."""
        return self._timer("wait_until", None, wake_time(when))

    async def sleep_async(self, duration: float | str) -> None:
        """:meth:`sleep` for async workflows (``await ctx.sleep(...)`` does the same)."""
        await self._timer_async("sleep", sleep_seconds(duration), None)

    def recv(self, topic: str, *, timeout: float | str | None = None) -> Any:
        """The next message sent to this run on ``topic`` (``app.send``), in the order sent,
        each received once; None if ``timeout`` (seconds, or ``"10m"``) passes first.

        With no message yet, the run sleeps like :meth:`sleep` until one comes or the
        timeout passes, whichever is first. What a recv got (or that it timed out) is its
        checkpoint: a replay gets the same. In an async workflow, ``await`` the result.
        """
        in_body("recv")
        topic = checked_name("topic", topic)
        seconds = None if timeout is None else sleep_seconds(timeout)
        exe = self._exe
        if exe.is_async:
            return self._recv_async(topic, seconds)
        exe.check_in()
        got, message, wake_at = exe.receive(topic, seconds)
        if not got:
            raise Sleep(wake_at, topic)
        return message

    async def _recv_async(self, topic: str, seconds: float | None) -> Any:
        exe = self._exe
        exe.check_in()
        got, message, wake_at = await exe.runtime.in_thread(exe.receive, topic, seconds)
        if not got:
            raise Sleep(wake_at, topic)
        return message

    def set_event(self, key: str, value: Any) -> Any:
        """Publish ``value`` under ``key`` for ``app.get_event(run_id, key)`` in any process;
        the latest value set wins. Once per call: a replay does not set it again. In an async
        workflow, ``await`` the result."""
        in_body("set_event")
        key = checked_name("key", key)
        data = to_jsonable_python(value)
        exe = self._exe
        if exe.is_async:
            return exe.runtime.in_thread(exe.publish, key, data)
        exe.publish(key, data)
        return None

    def start_child(
        self,
        workflow: Any,
        input: Any = None,
        *,
        key: str | None = None,
        on_parent_cancel: str = "cancel",
    ) -> Any:
        """Start a run of ``workflow`` (registered on this app, or its id) with ``input``,
        as a child of this run: a :class:`~longcall.workflows.children.ChildHandle` whose
        ``result()`` waits for it durably. Started once per ``key`` (the call's position in
        the body by default), however often this run replays. Cancelling this run cancels
        the child too, unless ``on_parent_cancel="abandon"``. In an async workflow, ``await``
        the handle."""
        exe = self._exe
        if exe.child_starter is None:
            raise WorkflowError("ctx.start_child needs a run executed by an App's workflows")
        return exe.child_starter(exe, workflow, input, key=key, on_parent_cancel=on_parent_cancel)

    async def start_child_async(
        self,
        workflow: Any,
        input: Any = None,
        *,
        key: str | None = None,
        on_parent_cancel: str = "cancel",
    ) -> Any:
        """:meth:`start_child` for async workflows (``await ctx.start_child(...)`` does the
        same)."""
        if not self._exe.is_async:
            raise WorkflowError("ctx.start_child_async is for async workflows: use start_child")
        return await self.start_child(workflow, input, key=key, on_parent_cancel=on_parent_cancel)

    def stream(self, key: str, value: Any) -> int | None:
        """Append ``value`` (JSON data) to the run's stream ``key``, committed at once, for
        ``app.read_stream(run_id, key)`` in any process; from the body or from a task (token
        by token). Its seq, or None when a replay had written it already. A body's write is
        made once; a task's once per attempt (see :mod:`longcall.workflows.streams`)."""
        return self._stream(key, value, close=False)

    def close_stream(self, key: str) -> None:
        """End the stream ``key``: readers stop after its last item. Closing twice does
        nothing; writing after it raises StreamClosed. Every stream ends with its run anyway."""
        self._stream(key, None, close=True)

    async def stream_async(self, key: str, value: Any) -> int | None:
        """:meth:`stream` for async code: the write runs on the runtime's threads."""
        frame = _frame.get()  # read here: the thread has no task frame of its own
        return await self._exe.runtime.in_thread(self._stream, key, value, close=False, at=frame)

    def _stream(self, key: str, value: Any, *, close: bool, at: Any = False) -> int | None:
        key = _streams.stream_key(key)
        data = None if close else _streams.data_of(value)
        exe = self._exe
        writer = self._writer
        if writer is None:
            writer = self._writer = _streams.StreamWriter()
        frame: _Frame | None = _frame.get() if at is False else at
        if frame is None:
            exe.write_held_back()  # a stream never shows what a lost checkpoint would redo
            scope = f"b{exe.position}"
        else:
            scope = f"t{frame.position}.{writer.execution}.a{frame.attempt}"
        origin = writer.origin(scope)
        return _streams.write(
            exe.runtime, exe.run.run_id, exe.holder, origin, key, data, close=close
        )

    def _timer(self, kind: str, seconds: float | None, until: float | None) -> Any:
        in_body(kind)
        exe = self._exe
        if exe.is_async:
            return self._timer_async(kind, seconds, until)
        exe.check_in()
        wake_at, due = exe.wake_time(kind, seconds, until)
        if not due:
            raise Sleep(wake_at)
        return None

    async def _timer_async(self, kind: str, seconds: float | None, until: float | None) -> None:
        exe = self._exe
        exe.check_in()
        wake_at, due = await exe.runtime.in_thread(exe.wake_time, kind, seconds, until)
        if not due:
            raise Sleep(wake_at)

    @property
    def state(self) -> dict[str, Any]:
        """The persisted fields' current values (a copy)."""
        return self._exe.state.snapshot()

    def patched(self, change_id: str) -> bool:
        """True where the run takes the code after the change ``change_id``: a new run, or
        one that had not reached this point before; False, on every replay, for a run that
        went past it on the code before the change. Plain ``if``, in sync and async bodies
        alike (a new run's answer is recorded in its checkpoints; see ``_versions``)."""
        in_body("patched")
        return self._exe.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """Where ``if ctx.patched(change_id):`` stood, once no run that went past it on the
        old code is left: runs that recorded the patch still replay, new ones record nothing.
        Remove this call too once those have finished."""
        in_body("deprecate_patch")
        self._exe.patched(change_id, deprecated=True)


class Execution:
    """One execution of a run's body, holding the run until it ends or suspends."""

    def __init__(
        self,
        runtime: Runtime,
        late_checkpoints: LateCheckpoints,
        run: Run,
        *,
        holder: str,
        lease: float,
        state: State,
        steps: list[Step],
        interrupts: dict[str, Interrupt],
        is_async: bool,
        holds_back: bool = False,
    ) -> None:
        self.runtime = runtime
        self.late_checkpoints = late_checkpoints
        self.run = run
        self.holder = holder
        self.lease = lease
        self.state = state
        self.steps = {s.position: s for s in steps}
        self.interrupts = interrupts
        self.is_async = is_async
        self.position = 0  # task positions taken so far
        self.interrupts_asked = 0
        self.body_emits: dict[int, int] = {}
        self.asked: list[tuple[str, str, dict[str, Any] | None, Any]] = []
        self.consumed: list[str] = []
        self.cancel_seen = run.cancel_requested
        self.wake_at: float | None = None  # set when the run goes to sleep
        self.recv_topic: str | None = None  # and this, when it waits for a message
        self.lost = False
        self.divergence: NonDeterminismError | None = None
        self._settled: dict[int, tuple[list[tuple[str, Any]], bool]] = {}
        self._applied = 0  # positions whose state changes are applied, in order
        self.ctx = TaskContext(self)
        # The app's workflows by id, and what starts a child run (children.start_child), for
        # ctx.start_child: the Workflows sets both (the children module is above this one).
        self.registry: dict[str, Any] = {}
        self.child_starter: Callable[..., Any] | None = None
        self._renew_at = time.monotonic() + lease / 3
        # The last task call's checkpoint, not yet written (``holds_back``): the run's end
        # writes it, or the next thing the run records, or the app's late writer.
        self.holds_back = holds_back
        self.held_back: Checkpoint | None = None
        self._writing = threading.Lock()  # a checkpoint is written once, and waited for

    # -- holding the run (the app's heartbeat renews the lease; see leases.py) -------------

    @property
    def lease_key(self) -> tuple[str, str]:
        return self.run.run_id, self.holder

    def renewed(self, cancelling: bool | None) -> None:
        self._renew_at = time.monotonic() + self.lease / 3
        if cancelling is None:
            self.lost = True
        elif cancelling:
            self.cancel_seen = True

    def renew(self) -> None:
        still = self.runtime.store.renew_runs([self.lease_key], lease=self.lease)
        self.renewed(still.get(self.lease_key))

    def check_in(self) -> None:
        """At a task call: stop if the run was lost or cancelled."""
        self.write_held_back()  # the previous call's, before this one does anything
        if time.monotonic() >= self._renew_at:  # the heartbeat is late: renew here
            self.renew()
        if self.lost:
            raise Lost()
        if self.cancel_seen:
            raise Cancelled()

    # -- task calls -----------------------------------------------------------------------

    def patched(self, change_id: str, *, deprecated: bool = False) -> bool:
        """``ctx.patched`` (and, with ``deprecated``, ``ctx.deprecate_patch``): looks at the
        next position without taking it (see :mod:`longcall.workflows._versions`)."""
        change_id = checked_change(change_id)
        digest = args_hash({"change_id": change_id})
        position = self.position + 1
        step = self.steps.get(position)
        if step is not None:
            if step.name != PATCH_MARKER or step.args_hash != digest:
                return False  # the run went past here on the old code (or another patch's)
            self.take_position()
            self.replay(position, PATCH_MARKER, digest)
            return True
        if deprecated:
            return True
        self.check_in()
        self.take_position()
        started = time.time()
        result = {"change_id": change_id}
        self.record(position, PATCH_MARKER, digest, True, result, _Frame(position), started)
        return True

    def take_position(self) -> int:
        self.position += 1
        return self.position

    def wake_time(
        self, kind: str, seconds: float | None, until: float | None
    ) -> tuple[float, bool]:
        """Take the body's next position for a timer: its wake-up time, and whether that has
        come (False: the run must sleep).

        The first time, the wake-up time (the database's clock) is recorded as the
        position's checkpoint before the run sleeps. A replay takes the recorded one, not the
        call's arguments (a deadline computed from the time of day would move every replay),
        and compares it with the time the run was claimed, which is on the same clock.
        """
        position = self.take_position()
        name = f"longcall.{kind}"
        digest = args_hash({})
        step = self.replay(position, name, digest)
        if step is not None:
            wake_at = float(step.result["wake_at"])
            return wake_at, wake_at <= self.run.updated_at
        now = self.runtime.store.database_now()
        wake_at = until if until is not None else now + (seconds or 0.0)
        started = time.time()
        self.record(position, name, digest, True, {"wake_at": wake_at}, _Frame(position), started)
        return wake_at, wake_at <= now

    def receive(self, topic: str, seconds: float | None) -> tuple[bool, Any, float | None]:
        """A recv's next positions (its timeout's, then its own): (True, the message or None
        for a timeout), or (False, None, when the timeout is due) when the run must wait."""
        deadline, due = (
            self.wake_time("recv_timeout", seconds, None) if seconds is not None else (None, False)
        )
        position = self.take_position()
        name, digest = "longcall.recv", args_hash({"topic": topic})
        step = self.replay(position, name, digest)
        if step is not None:
            return True, step.result["message"], None
        self.write_held_back()  # the store writes this one itself, after any held back
        started = time.time()
        taking = Checkpoint(position, name, digest, None, [], 1, started, started)
        got, message = self.runtime.store.take_message(self.run.run_id, self.holder, topic, taking)
        if got:
            self.settle(position, [], replayed=False)
            return True, message, None
        if due:
            timed_out = {"message": None, "timed_out": True}
            self.record(position, name, digest, True, timed_out, _Frame(position), started)
            return True, None, None
        return False, None, deadline

    def publish(self, key: str, value: Any) -> None:
        """``ctx.set_event`` at the body's next position, unless a replay finds it done."""
        position = self.take_position()
        name, digest = "longcall.set_event", args_hash({"key": key})
        if self.replay(position, name, digest) is not None:
            return
        started = time.time()
        self.runtime.store.set_run_value(self.run.run_id, key, value)
        self.record(position, name, digest, True, None, _Frame(position), started)

    def replay(self, position: int, name: str, digest: str) -> Step | None:
        """The checkpoint at ``position`` if there is one (checked against this call)."""
        step = self.steps.get(position)
        if step is None:
            return None
        if step.name != name or step.args_hash != digest:
            self.divergence = NonDeterminismError(
                f"run {self.run.run_id!r} is not deterministic: call {position} was "
                f"{step.name}(args {step.args_hash}) when the run was recorded, and is "
                f"{name}(args {digest}) now; change the workflow only for new runs (a new "
                f"version, or ctx.patched: docs/workflows.md, Versions)"
            )
            raise self.divergence
        self.settle(position, step.changes, replayed=True)
        return step

    def settle(self, position: int, changes: list[tuple[str, Any]], *, replayed: bool) -> None:
        """Apply a finished call's state changes in position order, not finishing order:
        tasks run concurrently finish in any order, and a replay must reach the same state."""
        self._settled[position] = (changes, replayed)
        while self._applied + 1 in self._settled:
            self._applied += 1
            ready, from_record = self._settled.pop(self._applied)
            if from_record:
                self.state.apply_changes(ready)
            else:
                for field_name, update in ready:
                    self.state.set(field_name, update)

    def record(
        self,
        position: int,
        name: str,
        digest: str,
        ok: bool,
        result: Any,
        frame: _Frame,
        started: float,
    ) -> None:
        changes = frame.local.take_changes() if frame.local is not None and ok else []
        finished = time.time()
        step = Checkpoint(position, name, digest, result, changes, frame.attempt, started, finished)
        self.runtime.observers.tell(TaskDone(self.run.workflow_id, name, finished - started, ok))
        if ok and self.holds_back:
            with self._writing:
                if self.held_back is not None:  # tasks called at once, from threads
                    self._write(self.held_back)
                self.held_back = step
            self.late_checkpoints.held(self)
        elif not self._record(step, ok):
            raise Lost()
        self.settle(position, frame.updates if ok else [], replayed=False)

    def write_held_back(self) -> None:
        """Write the checkpoint held back, if any; a caller arriving meanwhile waits for it.
        What the write learns (the run lost, or being cancelled) the next task call acts on."""
        if self.held_back is None:  # every task call asks; most often nothing is held
            return
        with self._writing:
            if self.held_back is not None:
                self._write(self.held_back)

    def _write(self, step: Checkpoint) -> None:
        # With ``_writing`` held; ``step`` stays held back if the write fails.
        self._record(step, True)
        self.held_back = None
        self.late_checkpoints.released(self)

    def _record(self, step: Checkpoint, ok: bool) -> bool:
        """Commit the checkpoint; False when the run is no longer ours."""
        written, cancelling = self.runtime.store.record_step(
            self.run.run_id, self.holder, step, ok=ok
        )
        if not written:
            self.lost = True
        elif cancelling:
            self.cancel_seen = True  # the next task call ends the run
        return written

    def take_held_back(self) -> Checkpoint | None:
        """The checkpoint held back, for the run's end to write (None if there is none)."""
        with self._writing:
            step, self.held_back = self.held_back, None
            if step is not None:
                self.late_checkpoints.released(self)
        return step


class Task(Generic[P, R]):
    """A function whose every call in a run is checkpointed (``@app.task``).

    Typed as the function it wraps: ``Task[P, R]`` is called with the function's parameters
    and returns what it returns (a coroutine for an async task, to ``await``).
    """

    def __init__(self, func: Callable[P, R], *, name: str, retry: RetryPolicy) -> None:
        self.func: Callable[..., Any] = func
        self.name = name
        self.retry = retry
        self.is_async = inspect.iscoroutinefunction(func)
        self.signature = inspect.signature(func)
        self.context_param = context_param(self.signature)
        returns = self.signature.return_annotation
        self._adapter = (
            None
            if returns in (inspect.Signature.empty, None, "None")
            else pydantic.TypeAdapter(_resolve(func, "return"))
        )
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<longcall task {self.name!r}>"

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if self.context_param is not None:
            arguments.pop(self.context_param, None)
        return arguments

    def _decode(self, value: Any) -> Any:
        return value if self._adapter is None else self._adapter.validate_python(value)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        # What ``func`` returns (its recorded result on a replay), or the coroutine of it.
        return typing.cast(R, self._call(args, kwargs))

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        exe = _execution.get()
        if self.context_param is not None and exe is not None:
            kwargs.setdefault(self.context_param, exe.ctx)
        if exe is None or _frame.get() is not None:
            # Outside a run, or inside another task (whose checkpoint covers this call).
            return self.func(*args, **kwargs)
        exe.check_in()
        position = exe.take_position()
        digest = args_hash(self._arguments(args, kwargs))
        if self.is_async:
            return self._call_async(exe, position, digest, args, kwargs)
        step = exe.replay(position, self.name, digest)
        if step is not None:
            return self._replayed(step)
        return self._run_sync(exe, position, digest, args, kwargs)

    def _replayed(self, step: Step) -> Any:
        if not step.ok:
            raise TaskError(self.name, **step.result)
        return self._decode(step.result)

    def _run_sync(
        self,
        exe: Execution,
        position: int,
        digest: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        with task_span(exe.runtime.telemetry, exe.run.run_id, self.name, position):
            frame = _Frame(position)
            started = time.time()
            while True:
                token = _frame.set(frame)
                try:
                    value = self.func(*args, **kwargs)
                except Exception as exc:
                    failure = self._failed(exe, frame, exc)
                    if failure is None:
                        continue
                    exe.record(position, self.name, digest, False, failure, frame, started)
                    raise TaskError(self.name, **failure) from exc
                finally:
                    _frame.reset(token)
                break
            result = to_jsonable_python(value)
            exe.record(position, self.name, digest, True, result, frame, started)
            return value

    async def _call_async(
        self,
        exe: Execution,
        position: int,
        digest: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        step = exe.replay(position, self.name, digest)
        if step is not None:
            return self._replayed(step)
        with task_span(exe.runtime.telemetry, exe.run.run_id, self.name, position):
            return await self._run_async(exe, position, digest, args, kwargs)

    async def _run_async(
        self,
        exe: Execution,
        position: int,
        digest: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        frame = _Frame(position)
        started = time.time()
        runtime = exe.runtime
        while True:
            token = _frame.set(frame)
            try:
                value = await self.func(*args, **kwargs)
            except Exception as exc:
                failure = await runtime.in_thread(self._failed, exe, frame, exc, sleep=False)
                if failure is None:
                    await asyncio.sleep(self.retry.delay(frame.attempt - 1))
                    continue
                await runtime.in_thread(
                    exe.record, position, self.name, digest, False, failure, frame, started
                )
                raise TaskError(self.name, **failure) from exc
            finally:
                _frame.reset(token)
            break
        await runtime.in_thread(
            exe.record, position, self.name, digest, True, to_jsonable_python(value), frame, started
        )
        return value

    def _failed(
        self, exe: Execution, frame: _Frame, exc: Exception, *, sleep: bool = True
    ) -> dict[str, Any] | None:
        """None to try again (after the policy's wait), or the failure to record."""
        if frame.attempt < self.retry.max_attempts and not exe.cancel_seen:
            if sleep:
                time.sleep(self.retry.delay(frame.attempt))
            frame.attempt += 1
            frame.local, frame.updates, frame.emits = None, [], 0
            return None
        return {
            "error_type": type(exc).__name__,
            "message": str(exc),
            "attempts": frame.attempt,
        }


def _resolve(func: Callable[..., Any], name: str) -> Any:
    """A parameter's (or ``return``'s) annotation, with string annotations evaluated."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # an annotation naming something not importable here
        return Any
    return hints.get(name, Any)


def in_body(what: str) -> None:
    """Refuse ``ctx.<what>`` inside a task: it would run again from the task's start."""
    if _frame.get() is not None:
        raise WorkflowError(
            f"ctx.{what} belongs in the workflow body: a task that waited would run again "
            "from its start when it woke"
        )


def run_body(
    body: Callable[..., Any], exe: Execution, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Call a workflow body with ``exe`` as the current execution."""
    token = _execution.set(exe)
    try:
        return body(*args, **kwargs)
    finally:
        _execution.reset(token)


async def run_body_async(
    body: Callable[..., Awaitable[Any]],
    exe: Execution,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    token = _execution.set(exe)
    try:
        return await body(*args, **kwargs)
    finally:
        _execution.reset(token)
