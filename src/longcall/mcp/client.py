"""The client half of the tasks extension (SEP-2663) over the official SDK's ``ClientSession``.

It declares ``io.modelcontextprotocol/tasks`` and claims the ``task`` result shape of
``tools/call`` without resolving it, so longcall keeps the task id (in its own table) and
polls ``tasks/get`` itself, from any process, long after the call that created the task.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

import httpx2
import mcp_types
from mcp.client import Client, ClientSession
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from longcall.mcp.tasks import TASKS_EXTENSION


class CreatedTask(mcp_types.Result):
    """A ``tools/call`` answered with a task (``resultType: task``)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class DetailedTask(mcp_types.Result):
    """A ``tasks/get`` answer, every field kept."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class _TaskIdParams(mcp_types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class _GetTask(mcp_types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams


class _CancelTask(mcp_types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams


class _UpdateTaskParams(_TaskIdParams):
    input_responses: dict[str, Any] = Field(serialization_alias="inputResponses")


class _UpdateTask(mcp_types.Request[_UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateTaskParams


async def _kept(created: CreatedTask, ctx: ClaimContext) -> mcp_types.CallToolResult:
    # Only reached by a call without allow_claimed; longcall always keeps the task itself.
    raise RuntimeError("longcall polls remote tasks itself; call with allow_claimed=True")


class TasksClientExtension(ClientExtension):
    """Declares the tasks extension and claims the ``task`` result, unresolved."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            ResultClaim(
                result_type="task", model=CreatedTask, resolve=_kept, protocol_versions=versions
            ),
        )


@contextlib.asynccontextmanager
async def http_session(
    url: str, headers: Mapping[str, str], *, http_timeout: float = 20.0
) -> AsyncIterator[ClientSession]:
    """An initialised session to the streamable-HTTP server at ``url`` (its /mcp address)."""
    async with httpx2.AsyncClient(headers=dict(headers), timeout=http_timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, extensions=[TasksClientExtension()]) as client:
            yield client.session


async def call_as_task(
    session: ClientSession, tool: str, args: Mapping[str, Any]
) -> CreatedTask | mcp_types.CallToolResult:
    """Call ``tool`` declaring the extension: a task, or (a server that chose to answer at
    once) the plain result."""
    answer = await session.call_tool(tool, dict(args), allow_claimed=True)
    if isinstance(answer, CreatedTask | mcp_types.CallToolResult):
        return answer
    raise TypeError(f"tools/call {tool!r} answered with {type(answer).__name__}")


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    got = await session.send_request(_GetTask(params=_TaskIdParams(task_id=task_id)), DetailedTask)
    return got.model_dump(by_alias=True, exclude_none=True)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    request = _CancelTask(params=_TaskIdParams(task_id=task_id))
    await session.send_request(request, mcp_types.Result)


async def update_task(
    session: ClientSession, task_id: str, input_responses: Mapping[str, Any]
) -> None:
    """Answer a task's ``inputRequests`` by key (``tasks/update``), e.g.
    ``{"interrupt-1": {"action": "accept", "content": {...}}}``."""
    params = _UpdateTaskParams(task_id=task_id, input_responses=dict(input_responses))
    await session.send_request(_UpdateTask(params=params), mcp_types.Result)
