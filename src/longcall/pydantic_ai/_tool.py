"""A long-running pydantic-ai tool backed by a longcall job, deferred through ``CallDeferred``.

pydantic-ai's ``RunContext`` gives the tool its call id and run id but not the conversation it
serves: :class:`~longcall.pydantic_ai.PydanticAiRunner` names the session for the run in
:data:`CURRENT_SESSION`, so the call records the whole join (app, user, session, call id, and
the run id as the invocation) before it defers.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, overload

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import CallDeferred, UserError

from longcall.app import App
from longcall.core.jobs import CallIds, SessionKey
from longcall.jobs.tools import JobHandle, LongRunningTool

# The session the running agent serves, set by PydanticAiRunner around each run.
CURRENT_SESSION: contextvars.ContextVar[SessionKey | None] = contextvars.ContextVar(
    "longcall_pydantic_ai_session", default=None
)


def _call_ids(ctx: RunContext[Any]) -> CallIds:
    session = CURRENT_SESSION.get()
    if session is None:
        raise UserError(
            f"longcall tool {ctx.tool_name!r} was called outside a PydanticAiRunner: run the "
            "agent with app.run_turn_async(runner, ...) so its job knows the session to resume"
        )
    return CallIds(
        app_name=session.app_name,
        user_id=session.user_id,
        session_id=session.session_id,
        call_id=ctx.tool_call_id,
        invocation_id=ctx.run_id,
    )


def deferring(job_tool: LongRunningTool) -> Callable[..., Any]:
    """The tool function pydantic-ai calls: record the job, then defer the call.

    An answer without a job (bad arguments, a body that raised, another user's key) is
    returned at once: there is nothing to wait for, and the model hears why.
    """

    async def call(ctx: RunContext[Any], **args: Any) -> Any:
        answer = await job_tool.invoke_async(args, _call_ids(ctx), context=(ctx,))
        if "jobId" not in answer:
            return answer
        raise CallDeferred(metadata=answer)

    call.__name__ = job_tool.name
    return call


@overload
def long_running_tool(
    app: App,
    func: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    key: str | None = None,
    deadline: str | float | None = None,
    on_cancel: Callable[[JobHandle], Any] | None = None,
    description: str | None = None,
) -> Tool[Any]: ...


@overload
def long_running_tool(
    app: App,
    func: None = None,
    /,
    *,
    name: str | None = None,
    key: str | None = None,
    deadline: str | float | None = None,
    on_cancel: Callable[[JobHandle], Any] | None = None,
    description: str | None = None,
) -> Callable[[Callable[..., Any]], Tool[Any]]: ...


def long_running_tool(
    app: App,
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    key: str | None = None,
    deadline: str | float | None = None,
    on_cancel: Callable[[JobHandle], Any] | None = None,
    description: str | None = None,
) -> Tool[Any] | Callable[[Callable[..., Any]], Tool[Any]]:
    """Make ``func`` a durable pydantic-ai tool registered with ``app`` (or, without
    ``func``, a decorator that does).

    Give it to an ``Agent`` whose ``output_type`` includes ``DeferredToolRequests`` and run
    the agent through :class:`~longcall.pydantic_ai.PydanticAiRunner`. A call records a
    longcall job (the options are those of :meth:`App.long_running`) and is deferred; the
    job's result resumes the conversation under the call's id and name. A ``JobHandle``
    parameter gets the job, a ``RunContext`` parameter pydantic-ai's context; neither is
    shown to the model.
    """

    def build(f: Callable[..., Any]) -> Tool[Any]:
        job_tool = app.long_running(
            name=name,
            key=key,
            deadline=deadline,
            on_cancel=on_cancel,
            description=description,
            context_types=(RunContext,),
        )(f)
        declaration = job_tool.declaration()
        return Tool.from_schema(
            deferring(job_tool),
            name=job_tool.name,
            description=declaration["description"],
            json_schema=declaration["parameters"],
            takes_ctx=True,
        )

    return build(func) if func is not None else build
