"""An MCP client that calls `translate` as a task, has it completed, and fetches the result.

    LONGCALL_TOKEN=<token> python client.py http://127.0.0.1:8800/mcp

It speaks MCP 2026-07-28 with the io.modelcontextprotocol/tasks extension through the
official `mcp` SDK: the call answers with a task at once, and tasks/get reports it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal

import httpx2
import mcp_types
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict, Field

from longcall import App

TASKS = "io.modelcontextprotocol/tasks"


class Task(mcp_types.Result):
    """A task as the server reports it (every field kept)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId")
    status: str


class CreatedTask(Task):
    result_type: Literal["task"] = Field(alias="resultType")


class TaskId(mcp_types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class GetTask(mcp_types.Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskId


async def _keep(created: CreatedTask, ctx: ClaimContext) -> mcp_types.CallToolResult:
    raise RuntimeError("this client polls its tasks itself (allow_claimed=True)")


class Tasks(ClientExtension):
    """Declares the tasks extension, so the server may answer a call with a task."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_keep),)


async def main(url: str, token: str) -> None:
    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), extensions=[Tasks()]) as client,
    ):
        session = client.session
        args = {"document": "minutes.pdf", "language": "Welsh"}
        created = await session.call_tool("translate", args, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        print(f"task {created.task_id}: {created.status}", flush=True)

        async def poll() -> Task:
            return await session.send_request(GetTask(params=TaskId(task_id=created.task_id)), Task)

        task = await poll()
        message = (task.model_extra or {}).get("statusMessage")
        print(f"task {task.task_id}: {task.status} ({message})", flush=True)

        # Hours later the agency answers. Its signed webhook (or `longcall jobs complete`, or
        # a person on the dashboard) completes the job; here we do it in Python.
        with App(os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///mcp_tasks.db")) as app:
            await app.complete_async(created.task_id, {"translation": "cofnodion.pdf"})

        for _ in range(60):  # poll every half second, for up to 30 s
            task = await poll()
            if task.status != "working":
                break
            await asyncio.sleep(0.5)
        result = (task.model_extra or {}).get("result", {})
        print(f"task {task.task_id}: {task.status}: {result.get('structuredContent')}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], os.environ["LONGCALL_TOKEN"]))
