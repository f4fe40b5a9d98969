"""A minimal tasks-extension client over the SDK's own ``ClientSession``, for the tests.

It declares ``io.modelcontextprotocol/tasks`` and claims the ``task`` result shape without
resolving it, so a test holds the task id and drives ``tasks/get`` / ``tasks/cancel`` itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import httpx2
import mcp_types
from mcp.client import Client, ClientSession
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(mcp_types.Result):
    """A ``tools/call`` answered with a task."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class DetailedTask(mcp_types.Result):
    """A ``tasks/get`` answer, every field kept."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class TaskIdParams(mcp_types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class GetTask(mcp_types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams


class CancelTask(mcp_types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


async def _never(created: CreatedTask, ctx: ClaimContext) -> mcp_types.CallToolResult:
    raise AssertionError("the tests call with allow_claimed=True and resolve tasks themselves")


class TasksExtension(ClientExtension):
    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            ResultClaim(
                result_type="task", model=CreatedTask, resolve=_never, protocol_versions=versions
            ),
        )


@contextlib.asynccontextmanager
async def http_session(
    base: str, token: str | None, *, tasks: bool = True
) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        extensions = [TasksExtension()] if tasks else []
        async with Client(transport, extensions=extensions) as client:
            yield client.session


async def create(session: ClientSession, tool: str, args: dict[str, Any]) -> CreatedTask:
    created = await session.call_tool(tool, args, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def get(session: ClientSession, task_id: str) -> dict[str, Any]:
    got = await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), DetailedTask)
    return got.model_dump(by_alias=True, exclude_none=True)


async def cancel(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), mcp_types.Result)
