"""Tools of a remote MCP server that answer with tasks, as longcall long-running tools.

A call records a local job with the whole join (as any long-running tool), then calls the
remote tool declaring the tasks extension and keeps the task it answers with in
:class:`~longcall.mcp.remote_table.RemoteTaskTable`; the model gets longcall's pending map.
A :class:`~longcall.mcp.poller.RemoteTaskPoller` polls the task and answers the job when the
task ends, and the deliverer resumes the agent once, as for any job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import mcp_types

from longcall.app import App
from longcall.errors import ConfigError, ToolArgumentsError
from longcall.jobs.tools import JobHandle, LongRunningTool
from longcall.mcp.client import CreatedTask, call_as_task, http_session
from longcall.mcp.remote_table import RemoteTaskTable


@dataclass(frozen=True, slots=True)
class RemoteServer:
    """A remote MCP server over streamable HTTP: ``url`` is its MCP endpoint (``…/mcp``),
    ``headers`` go with every request (``{"authorization": "Bearer …"}``). Only ``name`` is
    stored with a task, so credentials can change without touching the database."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 20.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("a remote MCP server needs a name")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"remote MCP server {self.name!r}: {self.url!r} is not an http(s) URL"
            )

    def __repr__(self) -> str:  # headers hold credentials: never in logs
        return f"RemoteServer({self.name!r}, {self.url!r})"


class RemoteTaskTool(LongRunningTool):
    """A remote MCP tool whose calls are local jobs waiting on remote tasks.

    The arguments are the remote tool's own (its JSON schema is the declaration); they are
    checked here only for the required names, the remote server validates them fully.
    """

    def __init__(
        self,
        remote: RemoteTasks,
        server: RemoteServer,
        tool: mcp_types.Tool,
        *,
        deadline: str | float | None = None,
    ) -> None:
        async def remote_call(job: JobHandle) -> None:  # the signature only; never called
            raise AssertionError("RemoteTaskTool calls the remote server itself")

        jobs = remote.app.jobs
        super().__init__(
            jobs.runtime,
            jobs.joins,
            remote_call,
            name=tool.name,
            description=tool.description or "",
            deadline=deadline,
        )
        self.remote = remote
        self.server = server
        self.schema: dict[str, Any] = dict(tool.input_schema)

    def declaration(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.schema}

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        required = self.schema.get("required") or []
        missing = {str(n): "missing required argument" for n in required if n not in args}
        if missing:
            raise ToolArgumentsError(self.name, missing)
        return dict(args)

    def json_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return dict(args)

    def call_body(
        self, handle: JobHandle, args: Mapping[str, Any], context: Sequence[object] = ()
    ) -> Any:
        return asyncio.run(self.call_body_async(handle, args, context))

    async def call_body_async(
        self, handle: JobHandle, args: Mapping[str, Any], context: Sequence[object] = ()
    ) -> Any:
        """Start the remote task and remember it; raising removes the local job again (the
        model gets an error map), so a server that cannot be reached leaves nothing behind.

        A worker's dispatcher runs this again (``attempt`` > 1) for a job whose caller died
        before its dispatch was recorded: a task already remembered is not started twice.
        """
        table, server = self.remote.table, self.server
        if handle.attempt > 1:
            kept = await asyncio.to_thread(table.get, handle.id)
            if kept is not None:
                return f"{self.name} is running as task {kept['task_id']} on {kept['server']}"
        async with http_session(server.url, server.headers, http_timeout=server.timeout) as session:
            answer = await call_as_task(session, self.name, args)
        if isinstance(answer, CreatedTask):
            first_poll = (answer.poll_interval_ms or 1000) / 1000
            await asyncio.to_thread(
                table.add,
                handle.id,
                server.name,
                answer.task_id,
                delay=first_poll,
                status_message=answer.status_message,
            )
            return {
                "message": answer.status_message
                or f"{self.name} is running as task {answer.task_id} on {server.name}",
                "remoteTaskId": answer.task_id,
            }
        # The server answered at once: the poller finishes the job from the stored answer.
        status = "failed" if answer.is_error else "completed"
        stored = {"status": status, "result": answer.model_dump(by_alias=True, exclude_none=True)}
        await asyncio.to_thread(table.add, handle.id, server.name, "", delay=0.0, answer=stored)
        return f"{self.name} answered at once on {server.name}"


class RemoteTasks:
    """The remote MCP servers an App's agents call tools of, and their tasks' table."""

    def __init__(self, app: App, servers: Sequence[RemoteServer]) -> None:
        self.app = app
        self.servers: dict[str, RemoteServer] = {}
        for server in servers:
            if server.name in self.servers:
                raise ConfigError(f"two remote MCP servers are named {server.name!r}")
            self.servers[server.name] = server
        self.table = RemoteTaskTable(app.store)

    def server(self, name: str) -> RemoteServer:
        try:
            return self.servers[name]
        except KeyError:
            raise ConfigError(
                f"no remote MCP server named {name!r} (known: {sorted(self.servers)})"
            ) from None

    def tool(
        self, server: str, tool: mcp_types.Tool, *, deadline: str | float | None = None
    ) -> RemoteTaskTool:
        """The App's long-running tool for ``tool`` of ``server``, registered on first use.

        ``deadline`` (``"2h"``): the job expires without a result by then (the agent is told,
        and the poller cancels the remote task)."""
        registered = self.app.tools.get(tool.name)
        if isinstance(registered, RemoteTaskTool) and registered.server.name == server:
            return registered
        if registered is not None:
            raise ConfigError(
                f"remote tool {tool.name!r} of {server!r}: a tool of that name is already "
                "registered with the App"
            )
        made = RemoteTaskTool(self, self.server(server), tool, deadline=deadline)
        self.app.tools[made.name] = made
        return made

    async def list_tools(
        self, server: str, *, deadline: str | float | None = None
    ) -> list[RemoteTaskTool]:
        """Every tool ``server`` lists, as the App's long-running tools."""
        remote = self.server(server)
        async with http_session(remote.url, remote.headers, http_timeout=remote.timeout) as session:
            listed = await session.list_tools()
        return [self.tool(server, t, deadline=deadline) for t in listed.tools]
