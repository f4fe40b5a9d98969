"""longcall: durable long-running tool calls for AI agents.

A tool starts work that outlives the request; longcall records the job in one durable row
joining the job id, the agent session and the function-call id, takes its completion from
anywhere, and resumes the conversation with the function response exactly once.
"""

from longcall.agents import (
    AgentEvent,
    AgentRunner,
    CallObserver,
    Fence,
    FunctionCall,
    FunctionResponse,
    Message,
)
from longcall.app import App
from longcall.clock import Clock, FakeClock, SystemClock
from longcall.delivery import Deliverer
from longcall.errors import (
    AgentError,
    AttachConflict,
    ConfigError,
    FenceLost,
    InvalidValue,
    JobNotFound,
    LongcallError,
    NotRedeliverable,
    SchemaError,
    StoreError,
    StoreUnavailable,
    SyncInAsyncError,
    ToolArgumentsError,
    UnknownCallError,
)
from longcall.jobs import (
    CallIds,
    Delivery,
    FinishOutcome,
    Job,
    JobEvent,
    JobState,
    SessionKey,
    job_id_for,
)
from longcall.scripted import Rule, ScriptedAgent
from longcall.sweeper import Sweeper
from longcall.tools import JobHandle, LongRunningTool
from longcall.worker import Worker
from longcall.workflows import RetryPolicy, RunStatus, TaskContext

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Names kept for one release after a rename.
    if name == "Resumer":
        from longcall.deprecation import deprecated

        deprecated("longcall.Resumer", "longcall.Deliverer")
        return Deliverer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentError",
    "AgentEvent",
    "AgentRunner",
    "App",
    "AttachConflict",
    "CallIds",
    "CallObserver",
    "Clock",
    "ConfigError",
    "Deliverer",
    "Delivery",
    "FakeClock",
    "Fence",
    "FenceLost",
    "FinishOutcome",
    "FunctionCall",
    "FunctionResponse",
    "InvalidValue",
    "Job",
    "JobEvent",
    "JobHandle",
    "JobNotFound",
    "JobState",
    "LongRunningTool",
    "LongcallError",
    "Message",
    "NotRedeliverable",
    "RetryPolicy",
    "Rule",
    "RunStatus",
    "SchemaError",
    "ScriptedAgent",
    "SessionKey",
    "StoreError",
    "StoreUnavailable",
    "Sweeper",
    "SyncInAsyncError",
    "SystemClock",
    "TaskContext",
    "ToolArgumentsError",
    "UnknownCallError",
    "Worker",
    "__version__",
    "job_id_for",
]
