"""A long-running ADK tool backed by a longcall job.

It is an ADK ``LongRunningFunctionTool`` (so events carry ``long_running_tool_ids`` and the
declaration says not to call it again), built from a plain function, whose call records the
whole join from the tool context (app, user, session, call and invocation id) before the
function runs, and always answers with longcall's pending map, never with nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext

from longcall.app import App
from longcall.jobs import CallIds
from longcall.tools import JobHandle, LongRunningTool


def call_ids(tool_context: ToolContext) -> CallIds:
    """Everything a tool context knows about the call it serves."""
    session = tool_context.session
    return CallIds(
        app_name=session.app_name,
        user_id=tool_context.user_id,
        session_id=session.id,
        call_id=tool_context.function_call_id,
        invocation_id=tool_context.invocation_id,
    )


class LongcallTool(LongRunningFunctionTool):
    """An ADK long-running tool whose calls are longcall jobs."""

    def __init__(self, job_tool: LongRunningTool) -> None:
        super().__init__(job_tool.func)
        self.name = job_tool.name
        self.job_tool = job_tool
        # longcall's own context parameters (JobHandle) are not the model's business either.
        self._ignore_params.extend(
            p for p in job_tool.context_params if p not in self._ignore_params
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Validate, record the job with the whole join, submit once, answer pending."""
        return await self.job_tool.invoke_async(
            args, call_ids(tool_context), context=(tool_context,)
        )


def long_running_tool(
    app: App,
    func: Callable[..., Any] | None = None,
    /,
    *,
    key: str | None = None,
    deadline: str | float | None = None,
    on_cancel: Callable[[JobHandle], Any] | None = None,
    name: str | None = None,
) -> LongcallTool | Callable[[Callable[..., Any]], LongcallTool]:
    """Make ``func`` a durable ADK long-running tool registered with ``app``.

    The options are those of :meth:`App.long_running`. A ``ToolContext`` parameter is
    injected as ADK would; a ``JobHandle`` parameter gets the job.
    """

    def build(f: Callable[..., Any]) -> LongcallTool:
        job_tool = app.long_running(
            name=name,
            key=key,
            deadline=deadline,
            on_cancel=on_cancel,
            context_types=(ToolContext,),
        )(f)
        return LongcallTool(job_tool)

    return build(func) if func is not None else build
