"""Durable functional workflows: ``@app.workflow``, ``@app.task``, state, interrupts.

A workflow is a plain function; each call of a task inside it is checkpointed before it
returns, so a run resumed after a crash, a restart or an answer to an interrupt skips the
calls that finished and gets their recorded results. Task bodies are at-least-once: the call
that was in flight when a process died runs again.
"""

from longcall.core.runs import HistoryEntry, Interrupt, Run, RunEvent, RunStatus, Step
from longcall.workflows._versions import checked_version
from longcall.workflows.answers import answer_problems, key_number
from longcall.workflows.children import ChildHandle
from longcall.workflows.engine import Cancelled, RetryPolicy, Suspend, Task, TaskContext
from longcall.workflows.runs import RunDetails, Workflow, Workflows
from longcall.workflows.state import (
    Append,
    Custom,
    Merge,
    Messages,
    Reducer,
    RemoveMessage,
    Replace,
    State,
    StateError,
    StateSchemaValidator,
    StateValidationError,
    Transient,
)
from longcall.workflows.streams import StreamClosed, StreamItem

__all__ = [
    "Append",
    "Cancelled",
    "ChildHandle",
    "Custom",
    "HistoryEntry",
    "Interrupt",
    "Merge",
    "Messages",
    "Reducer",
    "RemoveMessage",
    "Replace",
    "RetryPolicy",
    "Run",
    "RunDetails",
    "RunEvent",
    "RunStatus",
    "State",
    "StateError",
    "StateSchemaValidator",
    "StateValidationError",
    "Step",
    "StreamClosed",
    "StreamItem",
    "Suspend",
    "Task",
    "TaskContext",
    "Transient",
    "Workflow",
    "Workflows",
    "answer_problems",
    "checked_version",
    "key_number",
]
