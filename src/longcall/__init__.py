"""longcall: durable long-running tool calls for AI agents.

A tool starts work that outlives the request; longcall records the job in one durable row
joining the job id, the agent session and the function-call id, takes its completion from
anywhere, and resumes the conversation with the function response exactly once.
"""

from longcall.agents import (
    AgentEvent,
    AgentRunner,
    Fence,
    FunctionCall,
    FunctionResponse,
    Message,
)
from longcall.app import App
from longcall.core.clock import Clock, FakeClock, SystemClock
from longcall.core.jobs import (
    CallIds,
    Delivery,
    FinishOutcome,
    Job,
    JobEvent,
    JobPage,
    JobState,
    SessionKey,
    job_id_for,
)
from longcall.core.retention import Retention
from longcall.errors import (
    AgentError,
    AttachConflict,
    ChildCancelled,
    ChildFailed,
    ChildTimeout,
    ConfigError,
    CronNotFound,
    FenceLost,
    InvalidAnswer,
    InvalidValue,
    JobNotFound,
    LongcallError,
    NonDeterminismError,
    NotRedeliverable,
    RunNotFound,
    RunStateError,
    SchemaError,
    StoreError,
    StoreUnavailable,
    SyncInAsyncError,
    TaskError,
    ToolArgumentsError,
    UnknownCallError,
    WorkflowError,
    WorkflowNotFound,
)
from longcall.jobs.delivery import Deliverer
from longcall.jobs.observer import CallObserver
from longcall.jobs.tools import JobHandle, LongRunningTool
from longcall.testing.scripted import Rule, ScriptedAgent
from longcall.worker import Worker
from longcall.workflows import (
    ChildHandle,
    Interrupt,
    RetryPolicy,
    Run,
    RunDetails,
    RunEvent,
    RunStatus,
    StateSchemaValidator,
    Task,
    TaskContext,
    Workflow,
)

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Names kept for one release: renamed ones, and internals no longer exported here.
    from longcall.core.deprecation import deprecated

    if name == "Resumer":
        deprecated("longcall.Resumer", "longcall.Deliverer")
        return Deliverer
    if name == "InvalidResume":
        deprecated("longcall.InvalidResume", "longcall.InvalidAnswer")
        return InvalidAnswer
    if name == "Sweeper":
        from longcall.jobs.sweeper import Sweeper

        deprecated("longcall.Sweeper", "app.sweeper() or longcall.jobs.sweeper.Sweeper")
        return Sweeper
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentError",
    "AgentEvent",
    "AgentRunner",
    "App",
    "AttachConflict",
    "CallIds",
    "CallObserver",
    "ChildCancelled",
    "ChildFailed",
    "ChildHandle",
    "ChildTimeout",
    "Clock",
    "ConfigError",
    "CronNotFound",
    "Deliverer",
    "Delivery",
    "FakeClock",
    "Fence",
    "FenceLost",
    "FinishOutcome",
    "FunctionCall",
    "FunctionResponse",
    "Interrupt",
    "InvalidAnswer",
    "InvalidValue",
    "Job",
    "JobEvent",
    "JobHandle",
    "JobNotFound",
    "JobPage",
    "JobState",
    "LongRunningTool",
    "LongcallError",
    "Message",
    "NonDeterminismError",
    "NotRedeliverable",
    "Retention",
    "RetryPolicy",
    "Rule",
    "Run",
    "RunDetails",
    "RunEvent",
    "RunNotFound",
    "RunStateError",
    "RunStatus",
    "SchemaError",
    "ScriptedAgent",
    "SessionKey",
    "StateSchemaValidator",
    "StoreError",
    "StoreUnavailable",
    "SyncInAsyncError",
    "SystemClock",
    "Task",
    "TaskContext",
    "TaskError",
    "ToolArgumentsError",
    "UnknownCallError",
    "Worker",
    "Workflow",
    "WorkflowError",
    "WorkflowNotFound",
    "__version__",
    "job_id_for",
]
