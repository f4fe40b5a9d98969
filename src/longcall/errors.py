"""Every error longcall raises on purpose.

::

    LongcallError
    ├── ConfigError                 a URL, setting or registration that cannot work
    ├── StoreError                  the database misbehaved
    │   ├── StoreUnavailable        could not reach or write to it (after retries)
    │   └── SchemaError             schema missing, older (`longcall migrate`) or newer
    ├── InvalidValue                a value no store keeps (a NUL, an id over its bound);
    │                                   refused before any SQL, never retried
    ├── JobNotFound                 no job with that id
    ├── AttachConflict              the job is already joined to a different session or call
    ├── NotRedeliverable            redeliver of a job whose delivery is not orphaned or failed
    ├── ToolArgumentsError          a tool was called with missing or wrongly typed arguments
    ├── SyncInAsyncError            a sync method was called inside a running event loop
    ├── AgentError                  an agent run failed while delivering a response
    │   └── UnknownCallError        the agent's session has no such function call (never retried)
    ├── WebhookError                a webhook delivery was refused (``http_status``, ``code``)
    │   ├── WebhookUnauthorized     401: headers missing, signature bad, timestamp outside window
    │   ├── WebhookBadRequest       400: a signed body that is not UTF-8 JSON within the limits
    │   └── WebhookTooLarge         413: a body larger than the size limit
    └── WorkflowError               a workflow run could not go on as asked
        ├── WorkflowNotFound        no workflow registered under that id
        ├── RunNotFound             no run with that id
        ├── RunStateError           the run is not in a state that allows this (e.g. answers)
        ├── DuplicateRun            a queue already has an active run with this dedupe id
        ├── QueueNotFound           no queue declared under that name
        ├── NonDeterminismError     a resumed run called something else than the record says
        ├── TaskError               a task failed after its retries (seen at its call site)
        ├── ChildFailed             a child run (ctx.start_child) failed: seen at handle.result()
        ├── ChildCancelled          a child run was cancelled: seen at handle.result()
        ├── ChildTimeout            handle.result(timeout=...) passed before the child ended
        ├── InvalidAnswer           an answer of the wrong type, or to a question not asked
        │                           or already answered; ``errors`` lists them all
        ├── CronNotFound            no cron schedule with that id
        ├── CronConflict            a schedule with that id or name exists already
        └── CronValidationError     a schedule that cannot work; ``field`` names the field

"Needs input" is not an error but a control signal (``longcall.workflows.Suspend``, a
``BaseException``) that a workflow's ``except Exception`` cannot swallow.

Driver errors (sqlite3, psycopg) are wrapped with ``raise ... from`` so callers catch one root.
"""

from __future__ import annotations

from typing import Any, ClassVar


class LongcallError(Exception):
    """Root of every error longcall raises on purpose."""


class ConfigError(LongcallError):
    """A database URL, setting or registration that cannot work."""


class StoreError(LongcallError):
    """The database did something the store did not expect."""


class StoreUnavailable(StoreError):
    """The database could not be reached or written to, even after retries."""


class SchemaError(StoreError):
    """The database schema is missing, older than this code, or newer than it."""


class InvalidValue(LongcallError, ValueError):
    """A value the store refuses to keep or look up: a NUL character, an id longer than its
    bound, or one the database itself refused as data (SQLSTATE classes 22, 23 and 54).
    Raised at once, never retried: the same value would fail the same way.

    ``field`` names the value (a query parameter's name such as ``session_id``); ``nul`` is
    True when a NUL character was the problem.
    """

    def __init__(self, field: str, problem: str, *, nul: bool = False) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem
        self.nul = nul


class JobNotFound(LongcallError):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}")
        self.job_id = job_id


class NotRedeliverable(LongcallError):
    """Only an orphaned or failed delivery can be redelivered; this job's is neither."""

    def __init__(self, job_id: str, delivery: str) -> None:
        super().__init__(
            f"job {job_id!r} cannot be redelivered: its delivery is {delivery!r}, and only an "
            "orphaned or failed delivery can be sent again"
        )
        self.job_id = job_id
        self.delivery = delivery


class AttachConflict(LongcallError):
    """The job is already joined to another session or call; the new mapping was refused."""

    def __init__(self, job_id: str, conflicts: dict[str, tuple[str, str]]) -> None:
        detail = ", ".join(f"{k}: has {old!r}, got {new!r}" for k, (old, new) in conflicts.items())
        super().__init__(f"job {job_id!r} is already attached differently ({detail})")
        self.job_id = job_id
        self.conflicts = conflicts


class ToolArgumentsError(LongcallError):
    """A tool was called with missing or wrongly typed arguments; no job was created."""

    def __init__(self, tool_name: str, errors: dict[str, str]) -> None:
        detail = "; ".join(f"{k}: {v}" for k, v in errors.items())
        super().__init__(f"bad arguments for tool {tool_name!r}: {detail}")
        self.tool_name = tool_name
        self.errors = errors

    def as_response(self) -> dict[str, Any]:
        """The error map handed back to the model instead of a pending map."""
        return {"status": "error", "message": str(self), "errors": self.errors}


class SyncInAsyncError(LongcallError):
    """A blocking method was called from inside a running event loop."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method}() blocks and was called inside a running event loop; "
            f"await {method}_async() instead"
        )


class AgentError(LongcallError):
    """The agent run that should have taken a function response failed."""


class UnknownCallError(AgentError):
    """The session holds no function call with this id: the response can never be delivered."""


class FenceLost(AgentError):
    """A delivery's holder no longer holds its session under the delivery's fence.

    Someone took the session's lease since (a worker that took over after this holder
    stalled past its lease, or a user turn), or the lease ran out: whatever this delivery
    would write into the session now could double or interleave with theirs, so it writes
    nothing.
    """

    def __init__(self, session_id: str, holder: str, fence: int) -> None:
        super().__init__(
            f"session {session_id!r} is no longer held by {holder!r} under fence {fence}: "
            "its lease was taken by someone else or ran out"
        )
        self.session_id = session_id
        self.holder = holder
        self.fence = fence


class WebhookError(LongcallError):
    """A webhook delivery was refused.

    ``http_status`` is the status to answer with and ``code`` a stable machine-readable name;
    the message says what was wrong and never contains a secret.
    """

    http_status: ClassVar[int] = 400
    code: ClassVar[str] = "webhook_error"


class WebhookUnauthorized(WebhookError):
    """Not shown to come from a holder of the secret: a header is missing or malformed, no
    signature matches, or the timestamp is outside the tolerance window."""

    http_status = 401
    code = "webhook_unauthorized"


class WebhookBadRequest(WebhookError):
    """The signature verified but the body is not UTF-8 JSON within the nesting limit."""

    http_status = 400
    code = "webhook_bad_request"


class WebhookTooLarge(WebhookError):
    """The body is larger than the size limit; nothing else was checked."""

    http_status = 413
    code = "webhook_too_large"


class WorkflowError(LongcallError):
    """A workflow run could not go on as asked."""


class WorkflowNotFound(WorkflowError):
    """No workflow is registered under this id."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"no workflow registered as {workflow_id!r}")
        self.workflow_id = workflow_id


class RunNotFound(WorkflowError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class RunStateError(WorkflowError):
    """The run is not in a state that allows what was asked (resuming a finished run, say)."""


class NonDeterminismError(WorkflowError):
    """A resumed run made a different call at a position than the one recorded there."""


class TaskError(WorkflowError):
    """A task failed after all its attempts; raised at its call site, on replay too."""

    def __init__(self, task: str, error_type: str, message: str, attempts: int) -> None:
        super().__init__(
            f"task {task!r} failed after {attempts} attempt(s): {error_type}: {message}"
        )
        self.task = task
        self.error_type = error_type
        self.message = message
        self.attempts = attempts


class ChildFailed(WorkflowError):
    """A child run (``ctx.start_child``) failed: raised by ``handle.result()``, on replay
    too. ``error_type`` and ``message`` are the child's error."""

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"child run {run_id!r} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
        self.message = message


class ChildCancelled(WorkflowError):
    """A child run was cancelled before it finished: raised by ``handle.result()``."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"child run {run_id!r} was cancelled")
        self.run_id = run_id


class ChildTimeout(WorkflowError):
    """``handle.result(timeout=...)`` waited that long and the child had not ended; the
    child goes on (a later ``handle.result()`` can wait again)."""

    def __init__(self, run_id: str, timeout: float) -> None:
        super().__init__(f"child run {run_id!r} did not end within {timeout:g}s")
        self.run_id = run_id
        self.timeout = timeout


class InvalidAnswer(WorkflowError):
    """Answers of the wrong type, or to keys that cannot take one (a question the run has
    not asked, one already answered); nothing was stored.

    ``errors`` lists every problem as ``{"key", "path", "message"}``.
    """

    def __init__(self, run_id: str, errors: list[dict[str, str]]) -> None:
        lines = "; ".join(
            f"{e['key']}{'.' + e['path'] if e['path'] else ''}: {e['message']}" for e in errors
        )
        super().__init__(f"invalid answer for run {run_id!r}: {lines}")
        self.run_id = run_id
        self.errors = errors


# The name before answers had a name of their own ("resume" meant four things); same class.
InvalidResume = InvalidAnswer


class DuplicateRun(WorkflowError):
    """A run with the same deduplication id is already active (queued, running, waiting or
    asleep) in the queue; ``run_id`` is that run's id. Nothing was submitted."""

    def __init__(self, queue: str, dedupe_id: str, run_id: str) -> None:
        super().__init__(
            f"queue {queue!r} already has an active run with dedupe id {dedupe_id!r}: {run_id!r}"
        )
        self.queue = queue
        self.dedupe_id = dedupe_id
        self.run_id = run_id


class QueueNotFound(WorkflowError):
    """No queue has been declared (``app.queue``) under this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no queue named {name!r}: declare it with app.queue({name!r}, ...)")
        self.name = name


class CronNotFound(WorkflowError):
    """No cron schedule has this id."""

    def __init__(self, cron_id: str) -> None:
        super().__init__(f"no cron schedule with id {cron_id!r}")
        self.cron_id = cron_id


class CronConflict(WorkflowError):
    """Another schedule already has this id or this name."""

    def __init__(self, cron_id: str, name: str) -> None:
        super().__init__(f"a cron schedule with id {cron_id!r} or name {name!r} already exists")
        self.cron_id = cron_id
        self.name = name


class CronValidationError(WorkflowError, ValueError):
    """A schedule that cannot work; ``field`` names the API field at fault
    (``cronExpression``, ``timezone``, ``catchUpMax``, ``concurrencyPolicy``, …)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
