"""longcall's long-running tools served as durable MCP Tasks (the ``mcp`` extra).

:func:`mcp_server` builds an MCP server (the official ``mcp`` SDK's low-level ``Server``)
whose tools are the App's long-running tools and whose tasks are the App's jobs, per the
``io.modelcontextprotocol/tasks`` extension (SEP-2663, protocol revision 2026-07-28): a
task-augmented ``tools/call`` creates the job and answers with its task, ``tasks/get``
reads the job row, ``tasks/cancel`` cancels the job. Nothing lives in the server's memory,
so any server process on the same store answers for any task, before and after a restart.
The client side (:class:`RemoteTasks`, :class:`RemoteTaskPoller`): a remote server's tool
that answers with a task is a local job, answered when a poller sees the task end.
See docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.mcp needs the MCP SDK; install it with: pip install 'longcall[mcp]'"
    ) from exc

from longcall.mcp.poller import RemoteTaskPoller
from longcall.mcp.remote import RemoteServer, RemoteTasks, RemoteTaskTool
from longcall.mcp.server import CALLER_SCOPE_KEY, Caller, mcp_server
from longcall.mcp.tasks import TASKS_EXTENSION, task_of

__all__ = [
    "CALLER_SCOPE_KEY",
    "TASKS_EXTENSION",
    "Caller",
    "RemoteServer",
    "RemoteTaskPoller",
    "RemoteTaskTool",
    "RemoteTasks",
    "mcp_server",
    "task_of",
]
