"""The tests' side of the tasks extension: longcall's own client half (``longcall.mcp.client``,
over the SDK's ``ClientSession``), plus a session that does not declare the extension.

The extension claims the ``task`` result shape without resolving it, so a test holds the
task id and drives ``tasks/get`` / ``tasks/cancel`` itself. FastMCP's own client checks the
server independently (tests/test_mcp_tasks.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from longcall.mcp.client import CreatedTask, TasksClientExtension, call_as_task
from longcall.mcp.client import cancel_task as cancel
from longcall.mcp.client import get_task as get
from longcall.mcp.client import update_task as update
from longcall.mcp.tasks import TASKS_EXTENSION as TASKS

TasksExtension = TasksClientExtension

__all__ = ["TASKS", "TasksExtension", "cancel", "create", "get", "http_session", "update"]


@contextlib.asynccontextmanager
async def http_session(
    base: str, token: str | None, *, tasks: bool = True
) -> AsyncIterator[ClientSession]:
    """A session to ``base``'s /mcp with ``token``; ``tasks=False`` leaves the extension out."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        extensions = [TasksClientExtension()] if tasks else []
        async with Client(transport, extensions=extensions) as client:
            yield client.session


async def create(session: ClientSession, tool: str, args: dict[str, Any]) -> CreatedTask:
    created = await call_as_task(session, tool, args)
    assert isinstance(created, CreatedTask), created
    return created
