"""Time travel: a run's history step by step (``app.run_history``) and forks of a run from one
of its steps (``app.fork_run``).

A *step* is one checkpoint of the run, numbered by its position in the run's record: 1, 2, 3
… in the order the workflow body called them. Each of these takes one step:

* a task call (``@app.task``) made by the workflow body; tasks called inside a task are part
  of that task's step;
* ``ctx.sleep`` and ``ctx.wait_until`` (kind ``sleep`` / ``wait_until``: the wake-up time);
* ``ctx.recv`` (kind ``recv``: the message it got, or its timeout), and with a ``timeout`` one
  step more just before it (kind ``recv_timeout``: the timeout's wake-up time);
* ``ctx.set_event`` (kind ``set_event``).

Answers to interrupts and ``ctx.emit`` events are not steps: they are kept beside the
checkpoints, by key and by sequence number. A fork asks its questions again (its answers
start empty) and its event log starts empty.

Forking from step N creates a new run, queued for a worker, with a copy of steps 1 … N-1:
the worker executes the workflow body from the top with the code it has now, the copied steps
answer with their recorded results without executing (a failed one fails again), and step N
onwards executes. A copied step that no longer matches what the body calls there (another
task, other arguments: a new input that changes them) fails the fork with a
NonDeterminismError, as a resumed run would.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pydantic

from longcall.core.runs import HistoryEntry, Run, Step
from longcall.errors import InvalidValue
from longcall.workflows.messages import checked
from longcall.workflows.state import State

if TYPE_CHECKING:
    from longcall.workflows.runs import Workflows

BUILT_IN = "longcall."  # the prefix of the names of steps that are not tasks


def kind_of(name: str) -> str:
    return name.removeprefix(BUILT_IN) if name.startswith(BUILT_IN) else "task"


def entries(steps: list[Step], state: State | None) -> list[HistoryEntry]:
    """The history of a record: ``state`` (a fresh State of the workflow's fields, or None)
    takes each step's changes in turn."""
    found = []
    for step in steps:
        snapshot = None
        if state is not None:
            if step.ok:
                state.apply_changes(step.changes)
            snapshot = state.snapshot()
        found.append(
            HistoryEntry(
                step=step.position,
                kind=kind_of(step.name),
                name=step.name,
                args_hash=step.args_hash,
                ok=step.ok,
                output=step.result if step.ok else None,
                error=None if step.ok else step.result,
                attempts=step.attempts,
                started_at=step.started_at,
                finished_at=step.finished_at,
                changes=list(step.changes),
                state=snapshot,
            )
        )
    return found


def history(workflows: Workflows, run_id: str) -> list[HistoryEntry]:
    """The run's steps in order, each with the state after it. RunNotFound for an unknown
    run."""
    checked("run_id", run_id)
    store = workflows.runtime.store
    run = store.get_run(run_id)
    wf = workflows.registry.get(run.workflow_id)
    return entries(store.run_steps(run_id), None if wf is None else State(wf.state_fields))


def fork(
    workflows: Workflows,
    run_id: str,
    *,
    from_step: int,
    input: Any = None,
) -> Run:
    """Queue a new run of the same workflow that reuses steps 1 … ``from_step``-1 of
    ``run_id`` and executes from ``from_step`` on the current code; ``input`` replaces the
    original's input (None keeps it). Any run can be forked, finished or not.

    RunNotFound for an unknown run; WorkflowNotFound when its workflow is not registered
    here; InvalidValue for a step out of range (1 to one past the last recorded step) or an
    input the workflow refuses. Nothing is written then.
    """
    checked("run_id", run_id)
    if isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 1:
        raise InvalidValue("from_step", f"is a step number from 1, not {from_step!r}")
    store = workflows.runtime.store
    original = store.get_run(run_id)
    wf = workflows.resolve(original.workflow_id)
    if input is None:
        encoded = original.input
    else:
        try:
            encoded = wf.encode_input(input)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(["input", *(str(p) for p in first["loc"])])
            raise InvalidValue(where, first["msg"]) from None
    return store.fork_run(
        run_id,
        f"run-{uuid.uuid4().hex}",
        from_step=from_step,
        input=encoded,
        version=wf.version,  # it executes on the current code: this app's version
    )
