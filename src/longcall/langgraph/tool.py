"""A long-running LangGraph tool backed by a longcall job.

Its call records the job with the whole join before the function runs (app name and user
from the run's config, session = the thread id, call id from the ``ToolCall``, invocation =
the id of the model message that made the call), then waits in a LangGraph ``interrupt``
whose value is the pending map. The runner resumes that interrupt with the job's function
response, and the tool answers its call with a ``ToolMessage`` under the original call id and
tool name.

LangGraph re-runs an interrupted node from its start when it resumes, so the tool's body runs
again: it finds the job it recorded (the same call id, tool and arguments: the store returns
that job instead of creating another, and the function itself does not run again), and the
``interrupt`` then returns the resume value. A call whose ``key`` finds a job joined to another
call (an earlier request, in this thread or another) does not wait: that job's result goes to
its own call, so this one is answered at once with the pending map and a note saying so.

A call waits alone in its task: two long-running calls in one task would share the task's
interrupt counter, and LangGraph could not tell their resume values apart. A ``ToolNode``
reached by ``tools_condition`` runs every call of a model message in one task; there, when the
message holds more than one long-running call, each of them is refused with an error answer
and starts nothing. Route calls to the ``ToolNode`` one task each (:func:`send_each_tool_call`,
as ``create_react_agent`` does by default) to run them in parallel.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import interrupt
from pydantic import Field

from longcall.app import App
from longcall.core.jobs import CallIds, Job
from longcall.errors import AgentError
from longcall.jobs.tools import LONG_RUNNING_NOTE, JobHandle, LongRunningTool
from longcall.langgraph._protocol import interrupt_value, state_messages

APP_KEY = "longcall_app_name"
USER_KEY = "user_id"
PULL_TASK = "__pregel_pull"
WAITING_NOTE = (
    "This tool starts long-running work (minutes to days); its answer is the work's final "
    "status and result, given once the work has finished."
)


def _calling_message(runtime: ToolRuntime[Any, Any]) -> AIMessage | None:
    """The model message that holds the call ``runtime`` serves."""
    for message in reversed(state_messages(runtime.state)):
        if isinstance(message, AIMessage) and any(
            c.get("id") == runtime.tool_call_id for c in message.tool_calls
        ):
            return message
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def call_ids(runtime: ToolRuntime[Any, Any]) -> CallIds:
    """Everything a tool runtime knows about the call it serves."""
    configurable = (runtime.config or {}).get("configurable") or {}
    calling = _calling_message(runtime)
    return CallIds(
        app_name=_text(configurable.get(APP_KEY)),
        user_id=_text(configurable.get(USER_KEY)),
        session_id=_text(configurable.get("thread_id")),
        call_id=runtime.tool_call_id,
        invocation_id=calling.id if calling is not None else None,
    )


class LongcallTool(StructuredTool):
    """A LangChain tool whose calls are longcall jobs that wait in LangGraph interrupts."""

    job_tool: LongRunningTool = Field(exclude=True)
    long_running_names: Callable[[], Sequence[str]] = Field(exclude=True)

    @classmethod
    def of(
        cls, job_tool: LongRunningTool, long_running_names: Callable[[], Sequence[str]]
    ) -> LongcallTool:
        declaration = job_tool.declaration()

        async def wait_async(runtime: ToolRuntime, **args: Any) -> tuple[str, dict[str, Any]]:
            return await tool.wait_async(runtime, args)

        def wait(runtime: ToolRuntime, **args: Any) -> tuple[str, dict[str, Any]]:
            return tool.wait(runtime, args)

        tool = cls(
            name=job_tool.name,
            # The model never sees a pending answer here: the call waits for its result.
            description=job_tool.description.replace(LONG_RUNNING_NOTE, WAITING_NOTE),
            # The JSON schema as the model must see it; longcall validates the arguments
            # itself, so a bad call gets its error answer and no job.
            args_schema=declaration["parameters"],
            func=wait,
            coroutine=wait_async,
            response_format="content_and_artifact",
            job_tool=job_tool,
            long_running_names=long_running_names,
        )
        return tool

    def _ids(self, runtime: Any) -> CallIds:
        if not isinstance(runtime, ToolRuntime) or not runtime.tool_call_id:
            raise AgentError(
                f"tool {self.name!r} must run in a LangGraph ToolNode (it needs the tool call "
                "id and the thread to record its job)"
            )
        return call_ids(runtime)

    def _shared_task(self, runtime: ToolRuntime[Any, Any]) -> dict[str, Any] | None:
        """The error answer when this call shares its task with other long-running calls."""
        path = (runtime.config.get("metadata") or {}).get("langgraph_path") or ()
        if not path or path[0] != PULL_TASK:
            return None
        calling = _calling_message(runtime)
        names = set(self.long_running_names())
        siblings = [
            c["name"]
            for c in (calling.tool_calls if calling is not None else [])
            if c["name"] in names
        ]
        if len(siblings) < 2:
            return None
        return {
            "status": "error",
            "message": (
                f"{self.name} was not started: {len(siblings)} long-running calls "
                f"({', '.join(siblings)}) came in one message, and this graph runs them in one "
                "task, where their results could not be told apart. Call them one at a time, "
                "or route tool calls with longcall.langgraph.send_each_tool_call."
            ),
        }

    def _elsewhere(
        self, job: Job, ids: CallIds, pending: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The answer for a call whose key found a job joined to another call: its result
        goes to that call, so this one must not wait for it (its thread would never go on)."""
        if job.call_id == ids.call_id:
            return None
        where = "this conversation" if job.session_id == ids.session_id else "another one"
        return {
            **pending,
            "message": (
                f"{pending.get('message') or 'The job is running.'} It was started by an "
                f"earlier call in {where}; its result is reported there, not here."
            ),
        }

    def _wait(self, ids: CallIds, pending: dict[str, Any], job: Job) -> tuple[str, dict[str, Any]]:
        """Wait in an interrupt for the job's function response; answer the call with it.

        Answered at once instead: an error map (bad arguments, a body that raised: no job),
        or a job whose result goes to another call."""
        if pending.get("status") != "pending":
            return _content(pending)
        if (elsewhere := self._elsewhere(job, ids, pending)) is not None:
            return _content(elsewhere)
        assert ids.call_id is not None
        response = interrupt(interrupt_value(pending, call_id=ids.call_id, tool_name=self.name))
        if not isinstance(response, Mapping) or response.get("jobId") != pending["jobId"]:
            raise AgentError(
                f"tool {self.name!r} was resumed with {response!r}; it waits for the function "
                f"response of job {pending['jobId']!r} (resume it through LangGraphRunner)"
            )
        return _content(dict(response))

    async def wait_async(self, runtime: Any, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Record (or find) the job, then wait for its result in an interrupt."""
        ids = self._ids(runtime)
        if (refused := self._shared_task(runtime)) is not None:
            return _content(refused)
        pending = await self.job_tool.invoke_async(args, ids, context=(runtime,))
        job_id = pending.get("jobId")
        store, in_thread = self.job_tool.runtime.store, self.job_tool.runtime.in_thread
        job = await in_thread(store.get_job, job_id) if isinstance(job_id, str) else None
        return self._wait(ids, pending, job) if job is not None else _content(pending)

    def wait(self, runtime: Any, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """:meth:`wait_async` for a graph run synchronously."""
        ids = self._ids(runtime)
        if (refused := self._shared_task(runtime)) is not None:
            return _content(refused)
        pending = self.job_tool.invoke(args, ids, context=(runtime,))
        job_id = pending.get("jobId")
        job = self.job_tool.runtime.store.get_job(job_id) if isinstance(job_id, str) else None
        return self._wait(ids, pending, job) if job is not None else _content(pending)


def _content(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ToolMessage's content (the body as JSON) and artifact (the body)."""
    return json.dumps(body, default=str), body


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
    """Make ``func`` a durable LangGraph tool registered with ``app``.

    The options are those of :meth:`App.long_running`. A ``ToolRuntime`` parameter gets the
    call's runtime; a ``JobHandle`` parameter gets the job.
    """

    def build(f: Callable[..., Any]) -> LongcallTool:
        job_tool = app.long_running(
            name=name,
            key=key,
            deadline=deadline,
            on_cancel=on_cancel,
            context_types=(ToolRuntime,),
        )(f)
        return LongcallTool.of(job_tool, lambda: tuple(app.tools))

    return build(func) if func is not None else build
