"""The MCP server: an App's long-running tools, each call a task, each task a job.

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.lowlevel.Server` with the
tasks extension's three methods added as request handlers. Every handler reads or writes
the job table through the App and keeps nothing in memory, which is what lets several
server processes on one PostgreSQL store (or one process before and after a restart)
answer for the same task.

Who is asking: a transport that authenticates its callers (``longcall serve`` with bearer
tokens) puts a :class:`Caller` in the ASGI scope under :data:`CALLER_SCOPE_KEY`; a task is
then created in the caller's namespace and only that caller (or an admin) can see or cancel
it. Without one (stdio, which only the launching process can talk to) the caller is local
and trusted.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, cast

import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import INVALID_PARAMS, RequestParams
from mcp_types.jsonrpc import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from longcall.app import App
from longcall.core.jobs import CallIds, Job
from longcall.core.runs import Run
from longcall.errors import InvalidValue, JobNotFound, ToolArgumentsError
from longcall.jobs.tools import LongRunningTool
from longcall.mcp.run_tasks import RunTasks
from longcall.mcp.run_wire import run_task
from longcall.mcp.tasks import TASKS_EXTENSION, created_result, detailed_task

CALLER_SCOPE_KEY = "longcall.mcp.caller"
CANCEL_REASON = "cancelled by the MCP client"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sends a request: tasks are created under ``user_id``; ``admin`` sees every task."""

    user_id: str | None = None
    admin: bool = False

    def may_see(self, job: Job) -> bool:
        return self.owns(job.user_id)

    def owns(self, user_id: str | None) -> bool:
        """Whether a job or run of ``user_id`` is this caller's to see."""
        return self.admin or (user_id is not None and user_id == self.user_id)


LOCAL = Caller(admin=True)


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task's id."""

    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskParams):
    """``tasks/update``: answers to a task's input requests."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        found = scope.get(CALLER_SCOPE_KEY)
        if isinstance(found, Caller):
            return found
    return LOCAL


def _opted_in(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the tasks extension (2026-07-28 only: the
    SDK drops extension declarations from older handshakes)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities else None
    return bool(declared) and TASKS_EXTENSION in cast(dict[str, Any], declared)


def _missing_extension(tool_name: str) -> MCPError:
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=(
            f"tool {tool_name!r} runs only as a task: declare the {TASKS_EXTENSION} extension "
            "(MCP 2026-07-28) and call it again"
        ),
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _check_name_header(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """SEP-2663 mirrors ``taskId`` into the ``Mcp-Name`` header for routers that do not read
    bodies; a request whose header names another task is refused (the SDK checks the
    header only for the core protocol's methods)."""
    headers = getattr(ctx.request, "headers", None)
    header = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if header is not None and decode_header_value(header) != task_id:
        raise MCPError(
            code=HEADER_MISMATCH,
            message=f"the {MCP_NAME_HEADER} header does not match the request's taskId",
        )


def _task_not_found(task_id: str) -> MCPError:
    # One answer for unknown, malformed and other callers' ids: nobody probes for ids.
    return MCPError(code=INVALID_PARAMS, message=f"task {task_id!r} not found")


class JobTasks:
    """The handlers, over one App. Construct with :func:`mcp_server`."""

    def __init__(self, app: App, runs: RunTasks) -> None:
        self.app = app
        self.runs = runs

    def _tools(self) -> dict[str, LongRunningTool]:
        # Read at each request: tools registered after the server was built are served too.
        return dict(self.app.tools)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        tools = []
        for tool in self._tools().values():
            declaration = tool.declaration()
            tools.append(
                mcp_types.Tool(
                    name=tool.name,
                    description=declaration["description"],
                    input_schema=declaration["parameters"],
                )
            )
        # A workflow named like a long-running tool stays hidden: the tool answers the name.
        tools += [t for t in self.runs.tools() if t.name not in self._tools()]
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        tool = self._tools().get(params.name)
        if tool is None and params.name in self.runs.served():
            if not _opted_in(ctx):
                raise _missing_extension(params.name)
            run = await self.runs.start(params.name, params.arguments or {}, _caller(ctx).user_id)
            return cast(mcp_types.CallToolResult, {"resultType": "task", **run_task(run)})
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        if not _opted_in(ctx):
            raise _missing_extension(tool.name)
        try:
            tool.validate(params.arguments or {})
        except ToolArgumentsError as exc:
            error = MCPError(code=INVALID_PARAMS, message=str(exc), data={"errors": exc.errors})
            raise error from None
        caller = _caller(ctx)
        answer = await tool.invoke_async(params.arguments or {}, CallIds(user_id=caller.user_id))
        if answer.get("status") != "pending":
            # The tool's body refused the work (and its job was removed): no task to poll.
            text = str(answer.get("message", "the job could not be started"))
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=text)], is_error=True
            )
        job = await self.app.get_job_async(answer["jobId"])
        # A claimed result shape (resultType "task"): the SDK passes it through unsieved.
        return cast(mcp_types.CallToolResult, created_result(job))

    async def _task(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> Job | Run:
        """The job, else the run, that is this task. Job ids are looked up first, so the
        job-backed tasks answer as before; a run's task id is its run id (``run-<hex>``)."""
        if not _opted_in(ctx):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"tasks/* needs the {TASKS_EXTENSION} extension declared",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        _check_name_header(ctx, task_id)
        caller = _caller(ctx)
        try:
            job = await self.app.get_job_async(task_id)
        except (JobNotFound, InvalidValue):
            job = None
        if job is not None and job.tool_name in self._tools() and caller.may_see(job):
            return job
        run = await self.runs.find(task_id, caller.owns)
        if run is None:
            raise _task_not_found(task_id)
        return run

    async def get_task(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        task = await self._task(ctx, params.task_id)
        if isinstance(task, Run):
            return await self.runs.get(task)
        return detailed_task(task)

    async def cancel_task(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        """Cancel the job (its ``on_cancel`` hook runs in a worker) or the run; a finished
        task stays as it is and the request is still acknowledged, as SEP-2663 asks."""
        task = await self._task(ctx, params.task_id)
        if isinstance(task, Run):
            await self.runs.cancel(task)
        else:
            await self.app.cancel_async(task.job_id, CANCEL_REASON)
        return {"resultType": "complete"}

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        """Answers to a run's open questions (see :meth:`RunTasks.update`); a job takes no
        input from the client."""
        task = await self._task(ctx, params.task_id)
        if isinstance(task, Run):
            await self.runs.update(task, params.input_responses)
            return {"resultType": "complete"}
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"task {task.job_id!r} is not waiting for input; its result comes from outside",
        )


def mcp_server(
    app: App, *, name: str = "longcall", workflows: Collection[str] | None = None
) -> Server[Any]:
    """An MCP server whose tools are ``app``'s long-running tools, each served as a task,
    and its registered workflows, each call a background run served as a task that asks
    for input (``input_required``) where the run interrupts. ``workflows`` names the
    workflows to serve; None (the default) serves every one registered, ``()`` none.

    Serve it over stdio (``python -m longcall.mcp --app module:app``) or streamable HTTP
    (``longcall serve`` mounts it at ``/mcp``; or ``server.streamable_http_app()``, which
    leaves authentication to you). The tasks extension's methods answer only at protocol
    revision 2026-07-28, where extensions exist.
    """
    tasks = JobTasks(app, RunTasks(app, workflows))
    server: Server[Any] = Server(
        name,
        on_list_tools=tasks.list_tools,
        on_call_tool=tasks.call_tool,
    )
    server.add_request_handler("tasks/get", TaskParams, tasks.get_task)
    server.add_request_handler("tasks/cancel", TaskParams, tasks.cancel_task)
    server.add_request_handler("tasks/update", UpdateTaskParams, tasks.update_task)
    server.extensions[TASKS_EXTENSION] = {}
    return server
