"""A remote MCP server's task tools for google-adk agents, as durable longcall jobs.

:class:`LongcallMcpToolset` lists a remote server's tools through ADK's own ``McpToolset``
and gives the agent each as a long-running tool whose call is a longcall job waiting on the
remote task (see :mod:`longcall.mcp.remote`); a :class:`~longcall.mcp.RemoteTaskPoller`
answers the job when the task ends and the deliverer resumes the agent once. Needs both the
``adk`` and the ``mcp`` extras. See docs/mcp.md, "Client side".
"""

from __future__ import annotations

from longcall.mcp_adk.toolset import LongcallMcpToolset, RemoteAdkTool

__all__ = ["LongcallMcpToolset", "RemoteAdkTool"]
