"""Child workflows: ``ctx.start_child`` starts a run of another workflow, and the parent
waits for its end with ``handle.result()`` without holding a thread.

Starting is a checkpoint of the parent, and the child's run id is derived from the parent's
run id and the start's key (its position in the body unless given), with a unique key in
the store on (parent, key): a replay, or a parent that died between creating the child and
recording that it did, finds the same child instead of starting another. Waiting suspends
the parent like ``ctx.recv`` (queued, not claimable); the child's end wakes it in the same
transaction, and a parent suspending just as the child ends looks at the child in the
transaction of its own end, so no wake-up is lost. What the child ended with is the wait's
checkpoint: a replay gets the same result, or the same :class:`ChildFailed`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any, Protocol

import pydantic

from longcall.core.runs import Run
from longcall.errors import (
    ChildCancelled,
    ChildFailed,
    ChildTimeout,
    WorkflowError,
    WorkflowNotFound,
)
from longcall.store._run_children import waiting_topic
from longcall.workflows._timers import checked_name, sleep_seconds
from longcall.workflows.engine import Execution, Sleep, _Frame, args_hash, in_body


class Registered(Protocol):
    """What a child's start needs of a registered workflow (``runs.Workflow`` has it; this
    module is below ``runs``, which hands ``start_child`` to the engine)."""

    workflow_id: str
    version: str
    output_adapter: pydantic.TypeAdapter[Any]

    def encode_input(self, input: Any) -> Any: ...


ON_PARENT_CANCEL = ("cancel", "abandon")


def child_run_id(parent_run_id: str, key: str) -> str:
    """The child's run id: the same for the same parent and key, in every process."""
    digest = hashlib.blake2b(f"{parent_run_id}\0{key}".encode(), digest_size=12).hexdigest()
    return f"run-{digest}"


class ChildHandle:
    """A child run started by ``ctx.start_child``: its ``run_id``, and :meth:`result`."""

    def __init__(self, exe: Execution, run_id: str, workflow_id: str) -> None:
        self._exe = exe
        self.run_id = run_id
        self.workflow_id = workflow_id

    def __repr__(self) -> str:
        return f"<longcall child {self.run_id!r} of {self.workflow_id!r}>"

    def result(self, timeout: float | str | None = None) -> Any:
        """What the child returned (as its workflow's return type, where it is registered).

        Until the child ends the parent sleeps, holding no thread, and wakes when it does.
        :class:`~longcall.errors.ChildFailed` if the child failed (``error_type``,
        ``message``), :class:`~longcall.errors.ChildCancelled` if it was cancelled,
        :class:`~longcall.errors.ChildTimeout` if ``timeout`` (seconds, or ``"10m"``)
        passed first. In an async workflow, ``await`` the result.
        """
        in_body("result (of a child)")
        seconds = None if timeout is None else sleep_seconds(timeout)
        exe = self._exe
        if exe.is_async:
            return self._result_async(seconds)
        exe.check_in()
        return self._outcome(*self._look(seconds), seconds)

    # The timeout is durable (the database's clock, across restarts): asyncio's cannot be.
    async def result_async(self, timeout: float | str | None = None) -> Any:  # noqa: ASYNC109
        """:meth:`result` for async workflows (``await handle.result()`` does the same)."""
        in_body("result (of a child)")
        return await self._result_async(None if timeout is None else sleep_seconds(timeout))

    async def _result_async(self, seconds: float | None) -> Any:
        exe = self._exe
        exe.check_in()
        return self._outcome(*await exe.runtime.in_thread(self._look, seconds), seconds)

    def _look(self, seconds: float | None) -> tuple[dict[str, Any] | None, float | None]:
        """The wait's positions (its timeout's, then its own): (what the child ended with,
        None), or (None, when the timeout is due) when the parent must sleep."""
        exe = self._exe
        deadline, due = (
            exe.wake_time("child_timeout", seconds, None) if seconds is not None else (None, False)
        )
        position = exe.take_position()
        name, digest = "longcall.child_result", args_hash({"run_id": self.run_id})
        step = exe.replay(position, name, digest)
        if step is not None:
            return dict(step.result), None
        started = time.time()
        child = exe.runtime.store.get_run(self.run_id)
        if child.status.terminal:
            outcome = {
                "status": child.status.value,
                "result": child.result,
                "error": child.error,
            }
        elif due:
            outcome = {"status": "timed_out"}
        else:
            return None, deadline
        exe.record(position, name, digest, True, outcome, _Frame(position), started)
        return outcome, None

    def _outcome(
        self, outcome: dict[str, Any] | None, deadline: float | None, seconds: float | None
    ) -> Any:
        if outcome is None:
            raise Sleep(deadline, waiting_topic(self.run_id))
        status = outcome["status"]
        if status == "completed":
            wf: Registered | None = self._exe.registry.get(self.workflow_id)
            result = outcome["result"]
            return result if wf is None else wf.output_adapter.validate_python(result)
        if status == "cancelled":
            raise ChildCancelled(self.run_id)
        if status == "timed_out":
            raise ChildTimeout(self.run_id, seconds or 0.0)
        error = outcome.get("error") or {}
        raise ChildFailed(
            self.run_id, str(error.get("type", "Error")), str(error.get("message", ""))
        )


def start_child(
    exe: Execution,
    workflow: Any,
    input: Any,
    *,
    key: str | None,
    on_parent_cancel: str,
) -> Any:
    """``ctx.start_child``: see :meth:`TaskContext.start_child`."""
    in_body("start_child")
    if on_parent_cancel not in ON_PARENT_CANCEL:
        raise WorkflowError(f"on_parent_cancel is 'cancel' or 'abandon', not {on_parent_cancel!r}")
    if key is not None:
        key = checked_name("child key", key)
    wf = _resolve(exe.registry, workflow)
    encoded = wf.encode_input(input)  # a wrong input fails here, before anything is stored
    if exe.is_async:
        return _start_async(exe, wf, encoded, key, on_parent_cancel)
    exe.check_in()
    return _start(exe, wf, encoded, key, on_parent_cancel)


async def _start_async(
    exe: Execution, wf: Registered, encoded: Any, key: str | None, on_parent_cancel: str
) -> ChildHandle:
    exe.check_in()
    return await exe.runtime.in_thread(_start, exe, wf, encoded, key, on_parent_cancel)


def _start(
    exe: Execution, wf: Registered, encoded: Any, key: str | None, on_parent_cancel: str
) -> ChildHandle:
    workflow_id = wf.workflow_id
    position = exe.take_position()
    name = "longcall.start_child"
    digest = args_hash({"workflow": workflow_id, "key": key, "input": encoded})
    step = exe.replay(position, name, digest)
    if step is not None:
        return ChildHandle(exe, step.result["run_id"], workflow_id)
    started = time.time()
    parent = exe.run
    child_key = key if key is not None else f"position-{position}"
    run, _ = exe.runtime.store.create_child_run(
        child_run_id(parent.run_id, child_key),
        workflow_id,
        encoded,
        parent_run_id=parent.run_id,
        child_key=child_key,
        on_parent_cancel=on_parent_cancel,
        user_id=parent.user_id,
        version=wf.version,  # the child runs on the version this app registers
    )
    _check_same(run, parent.run_id, workflow_id, child_key)
    exe.record(position, name, digest, True, {"run_id": run.run_id}, _Frame(position), started)
    return ChildHandle(exe, run.run_id, workflow_id)


def _check_same(run: Run, parent_run_id: str, workflow_id: str, key: str) -> None:
    if run.parent_run_id != parent_run_id or run.workflow_id != workflow_id:
        raise WorkflowError(
            f"child key {key!r} of run {parent_run_id!r} already names run {run.run_id!r} "
            f"of {run.workflow_id!r}: give each child its own key"
        )


def _resolve(registry: Mapping[str, Registered], workflow: Any) -> Registered:
    if isinstance(workflow, str):
        found = registry.get(workflow)
        if found is None:
            raise WorkflowNotFound(workflow)
        return found
    workflow_id = getattr(workflow, "workflow_id", None)
    if not isinstance(workflow_id, str) or workflow_id not in registry:
        raise WorkflowError(
            f"ctx.start_child takes a workflow registered on this app or its id, not {workflow!r}"
        )
    return registry[workflow_id]
