"""A long-running ADK tool backed by a longcall job.

It is an ADK ``LongRunningFunctionTool`` (so events carry ``long_running_tool_ids`` and the
declaration says not to call it again), built from a plain function, whose call records the
whole join from the tool context (app, user, session, call and invocation id) before the
function runs, and always answers with longcall's pending map, never with nothing.

Inside an ``AgentTool`` the call's own session is a throw-away: AgentTool runs its agent on
a fresh in-memory session and discards it when the agent answers, so a result sent there
later would find nothing (the job would be orphaned). The job is joined to the AgentTool's
call in the caller's session instead (:func:`answered_call`), and its result answers that
call: the caller's agent resumes with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext

from longcall.app import App
from longcall.core.jobs import CallIds
from longcall.errors import AttachConflict
from longcall.jobs.tools import JobHandle, LongRunningTool

log = logging.getLogger("longcall.adk")


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


def agent_tool_caller(tool_context: ToolContext) -> ToolContext | None:
    """The context of the ``AgentTool`` call whose nested run ``tool_context`` serves, if any.

    google-adk (2.13) gives AgentTool's nested Runner an artifact service that forwards to
    the AgentTool call's own tool context; it is the one link from the nested run back to
    the caller (the nested invocation knows no parent). ``tests/adk/test_agent_tool.py``
    fails if a google-adk release drops it.
    """
    service = tool_context.get_invocation_context().artifact_service
    caller = getattr(service, "tool_context", None)
    return caller if isinstance(caller, ToolContext) else None


def called_tool_name(tool_context: ToolContext) -> str:
    """The name of the function call ``tool_context`` serves, as its session recorded it."""
    for event in reversed(tool_context.session.events):
        for call in event.get_function_calls():
            if call.id == tool_context.function_call_id:
                return call.name or "?"
    return "?"


def answered_call(tool_context: ToolContext) -> tuple[ToolContext, list[str]]:
    """The context whose function call a job's result must answer, and the AgentTools
    (outermost first) between it and ``tool_context``: none for a call in a lasting session.
    """
    agent_tools: list[str] = []
    while (caller := agent_tool_caller(tool_context)) is not None:
        tool_context = caller
        agent_tools.insert(0, called_tool_name(caller))
    return tool_context, agent_tools


class LongcallTool(LongRunningFunctionTool):
    """An ADK long-running tool whose calls are longcall jobs.

    Given to an agent that runs inside an ``AgentTool``, a call's job answers the outermost
    AgentTool call of the lasting session: the job's ids (and a key's ``{session_id}`` and
    ``{call_id}``) are that call's, and the caller's agent resumes with the job's result as
    the AgentTool's response (under the AgentTool's name); the inner agent never sees it
    (its session is gone). One AgentTool call waits on one job: a second long-running call
    in the same nested run is answered with an error map and starts nothing. Sub-agents
    (reached by transfer, or in ``mode="single_turn"``) share the caller's session and need
    none of this.
    """

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
        answered, agent_tools = answered_call(tool_context)
        if not agent_tools:
            return await self.job_tool.invoke_async(
                args, call_ids(tool_context), context=(tool_context,)
            )
        ids = call_ids(answered)
        try:
            answer = await self.job_tool.invoke_async(args, ids, context=(tool_context,))
        except AttachConflict as exc:
            log.warning(
                "tool %s inside AgentTool %r was not started: the AgentTool call %s already "
                "waits on a job (%s)",
                self.name,
                agent_tools[0],
                ids.call_id,
                exc,
            )
            return {
                "status": "error",
                "message": (
                    f"{self.name} was not started: it runs inside AgentTool "
                    f"{agent_tools[0]!r}, whose call already waits on another long-running "
                    "job, and one AgentTool call can wait on only one. Ask for it again once "
                    "that job's result is in."
                ),
            }
        if "jobId" in answer and tool_context.function_call_id:
            # The nested run's own events show this call with the job's id: it is joined
            # already, to the AgentTool's call, and must not be joined to this one.
            self.job_tool.joins.remember_joined(tool_context.function_call_id)
        return answer


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
