"""ADK's MCP toolset, with each tool's call made a longcall job waiting on a remote task.

ADK's ``McpTool`` calls the remote tool on a session that does not declare the tasks
extension and waits for the answer in the agent's turn. The tools here take ADK's listing
(names, descriptions, schemas, filters) but make the call through longcall: the job is
recorded with the whole join first, the remote task is started with the extension declared,
and the agent gets the pending map at once.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset, ToolPredicate
from google.adk.tools.mcp_tool import McpTool, McpToolset, StreamableHTTPConnectionParams
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from longcall.adk.tool import call_ids
from longcall.mcp.remote import RemoteTasks, RemoteTaskTool


class RemoteAdkTool(BaseTool):
    """One remote MCP tool as an ADK long-running tool backed by a longcall job."""

    def __init__(self, mcp_tool: McpTool, job_tool: RemoteTaskTool) -> None:
        super().__init__(name=job_tool.name, description=job_tool.description, is_long_running=True)
        self.mcp_tool = mcp_tool
        self.job_tool = job_tool

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        declaration = self.mcp_tool._get_declaration()
        # longcall's note (do not call again after a pending answer) with the server's text.
        return declaration.model_copy(update={"description": self.job_tool.description})

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Record the job with the whole join, start the remote task, answer pending."""
        return await self.job_tool.invoke_async(args, call_ids(tool_context))


class LongcallMcpToolset(BaseToolset):
    """The tools of ``remote``'s server ``server``, each call a durable longcall job.

    ``tool_filter`` is ADK's (names or a predicate). The server's headers (credentials) are
    the :class:`~longcall.mcp.RemoteServer`'s, for listing and for calls alike. ``deadline``
    (``"2h"``) makes each job expire without a result by then.
    """

    def __init__(
        self,
        remote: RemoteTasks,
        server: str,
        *,
        tool_filter: ToolPredicate | list[str] | None = None,
        deadline: str | float | None = None,
    ) -> None:
        super().__init__(tool_filter=tool_filter)
        self.remote = remote
        self.server = remote.server(server)
        self.deadline = deadline
        self.listing = McpToolset(
            connection_params=StreamableHTTPConnectionParams(
                url=self.server.url,
                headers=dict(self.server.headers),
                timeout=self.server.timeout,
            ),
            tool_filter=tool_filter,
        )

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        listed = await self.listing.get_tools(readonly_context)
        tools: list[BaseTool] = []
        for tool in listed:
            if isinstance(tool, McpTool):
                job_tool = self.remote.tool(
                    self.server.name, tool.raw_mcp_tool, deadline=self.deadline
                )
                tools.append(RemoteAdkTool(tool, job_tool))
        return tools

    async def close(self) -> None:
        await self.listing.close()
