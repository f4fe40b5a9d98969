"""A long-running tool for the OpenAI Agents SDK, backed by a longcall job.

The tool is a ``FunctionTool`` that needs approval: when the model calls it, the SDK pauses
the run on a tool-approval interruption instead of running it, and the call stays open (in
the SDK's session and in the paused ``RunState``) until the job ends.
:class:`~longcall.openai_agents.OpenAIAgentsRunner` records the job with the whole join
(app, user, session, call id) as the run pauses, and when the job's result comes it approves
the call and resumes the paused run: the tool then answers with the result it is handed
(:data:`ANSWERS`), so the model sees it as the output of its original call.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Mapping
from typing import Any

from agents import Agent, FunctionTool
from agents.tool_context import ToolContext

from longcall.app import App
from longcall.errors import ConfigError
from longcall.jobs.tools import JobHandle, LongRunningTool

# Set by the runner while it resumes a paused run: call id -> the function response the
# approved call answers with. A contextvar, so that concurrent resumes never see each
# other's answers (the SDK runs tools in tasks that copy the context).
ANSWERS: contextvars.ContextVar[Mapping[str, Mapping[str, Any]] | None] = contextvars.ContextVar(
    "longcall_openai_agents_answers", default=None
)


def tool_output(response: Mapping[str, Any]) -> str:
    """A function response as the tool output the model reads (JSON text)."""
    return json.dumps(dict(response), ensure_ascii=False, default=str)


class LongcallFunctionTool(FunctionTool):
    """A ``FunctionTool`` whose calls are longcall jobs (see the module docstring)."""

    job_tool: LongRunningTool

    @classmethod
    def of(cls, job_tool: LongRunningTool) -> LongcallFunctionTool:
        declaration = job_tool.declaration()

        async def answer(context: ToolContext[Any], arguments: str) -> str:
            found = (ANSWERS.get() or {}).get(context.tool_call_id)
            if found is None:
                # Approved by someone other than OpenAIAgentsRunner: there is no job result
                # to answer with, and a pending answer would close the call for good.
                return tool_output(
                    {
                        "status": "error",
                        "message": (
                            f"{job_tool.name} is a long-running longcall tool: its calls are "
                            "answered by OpenAIAgentsRunner when their job ends, not approved"
                        ),
                    }
                )
            return tool_output(found)

        tool = cls(
            name=job_tool.name,
            description=declaration["description"],
            params_json_schema=declaration["parameters"],
            on_invoke_tool=answer,
            # The declaration keeps optional parameters optional, which strict mode forbids.
            strict_json_schema=False,
            needs_approval=True,
        )
        tool.job_tool = job_tool
        return tool


def long_running_tool(
    app: App,
    func: Callable[..., Any] | None = None,
    /,
    *,
    key: str | None = None,
    deadline: str | float | None = None,
    on_cancel: Callable[[JobHandle], Any] | None = None,
    name: str | None = None,
    description: str | None = None,
) -> LongcallFunctionTool | Callable[[Callable[..., Any]], LongcallFunctionTool]:
    """Make ``func`` a durable long-running tool for ``agents.Agent(tools=[...])``.

    The options are those of :meth:`App.long_running`; a ``JobHandle`` parameter gets the
    job. The function runs when the call's job is recorded (it submits the work) and its
    return shapes the pending map; the model reads the job's result when it ends.
    """

    def build(f: Callable[..., Any]) -> LongcallFunctionTool:
        job_tool = app.long_running(
            name=name, key=key, deadline=deadline, on_cancel=on_cancel, description=description
        )(f)
        return LongcallFunctionTool.of(job_tool)

    return build(func) if func is not None else build


def longcall_tools(agent: Agent[Any]) -> dict[str, LongcallFunctionTool]:
    """The longcall tools of ``agent`` and of the agents it hands off to, by name.

    ConfigError for another tool that needs approval: this runner resumes only the
    interruptions of longcall's tools, and a run paused on another one would wait forever.
    """
    found: dict[str, LongcallFunctionTool] = {}
    seen: set[int] = set()
    todo: list[Agent[Any]] = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for tool in current.tools:
            if isinstance(tool, LongcallFunctionTool):
                found[tool.name] = tool
            elif isinstance(tool, FunctionTool) and tool.needs_approval is not False:
                raise ConfigError(
                    f"agent {current.name!r}: tool {tool.name!r} needs approval, which "
                    "OpenAIAgentsRunner cannot give; only longcall's long-running tools may"
                )
        todo.extend(h for h in current.handoffs if isinstance(h, Agent))
    return found
