"""How a longcall job reads as an MCP task, in process: the wire shapes and the handlers
for failures and input (no server process; tests/test_mcp_server.py runs the real ones)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

pytest.importorskip("longcall.mcp", reason="the mcp extra is not installed")

import mcp_types
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field

from longcall import App, JobState
from longcall.core.jobs import Job
from longcall.mcp import mcp_server
from longcall.mcp.tasks import detailed_task, task_of
from mcp_client import TasksExtension, create, get


class _UpdateParams(mcp_types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")
    input_responses: dict[str, Any] = Field(serialization_alias="inputResponses")


class _Update(mcp_types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams


def _update(task_id: str) -> _Update:
    return _Update(params=_UpdateParams(task_id=task_id, input_responses={"q": "yes"}))


def _job(state: JobState, **fields: object) -> Job:
    return Job("job-1", "report", state, created_at=0.0, updated_at=90.0, **fields)  # type: ignore[arg-type]


def test_task_fields_follow_the_job() -> None:
    """Status, timestamps and the status message come from the job row."""
    task = task_of(_job(JobState.STARTED, pending_message="queued", progress={"page": 2}))
    assert task == {
        "taskId": "job-1",
        "status": "working",
        "createdAt": "1970-01-01T00:00:00+00:00",
        "lastUpdatedAt": "1970-01-01T00:01:30+00:00",
        "ttlMs": None,
        "pollIntervalMs": 1000,
        "statusMessage": '{"page": 2}',
    }
    assert task_of(_job(JobState.STARTED, pending_message="queued"))["statusMessage"] == "queued"
    assert "statusMessage" not in task_of(_job(JobState.STARTED))


@pytest.mark.parametrize("state", [JobState.FAILED, JobState.EXPIRED])
def test_failed_and_expired_jobs_are_failed_tasks(state: JobState) -> None:
    """A failed or expired job is a failed task whose error carries the job's reason."""
    detailed = detailed_task(_job(state, result={"error": "the agency closed"}))
    assert detailed["status"] == "failed"
    assert detailed["statusMessage"] == "the agency closed"
    assert detailed["error"] == {
        "code": -32603,
        "message": "the agency closed",
        "data": {"state": state.value, "result": {"error": "the agency closed"}},
    }
    assert "result" not in detailed


def test_completed_task_inlines_the_result_as_a_call_tool_result() -> None:
    """A succeeded job's result comes back as the tool call's result: JSON text and
    structured content (a non-object wrapped in ``result``)."""
    detailed = detailed_task(_job(JobState.SUCCEEDED, result=[1, 2]))
    assert detailed["status"] == "completed"
    assert detailed["result"] == {
        "content": [{"type": "text", "text": "[1, 2]"}],
        "structuredContent": {"result": [1, 2]},
        "isError": False,
    }


def test_failure_and_refused_input_through_the_sdk_client(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """In process: app.fail makes tasks/get report a failed task; tasks/update is refused
    with a clear error; a tool body that raises answers an error result and leaves no job."""
    with App(f"sqlite:///{tmp_path / 'tasks.db'}") as app:

        @app.long_running
        def report(topic: str) -> str:
            """Write a report."""
            if topic == "forbidden":
                raise RuntimeError("the agency refuses this topic")
            return "queued"

        async def scenario() -> None:
            async with Client(mcp_server(app), extensions=[TasksExtension()]) as client:
                created = await create(client.session, "report", {"topic": "owls"})
                await app.fail_async(created.task_id, "the agency closed")
                failed = await get(client.session, created.task_id)
                assert (failed["status"], failed["error"]["message"]) == (
                    "failed",
                    "the agency closed",
                )
                with pytest.raises(MCPError) as refused:
                    await client.session.send_request(_update(created.task_id), mcp_types.Result)
                assert refused.value.error.code == INVALID_PARAMS
                assert "not waiting for input" in refused.value.error.message
                raised = await client.session.call_tool(
                    "report", {"topic": "forbidden"}, allow_claimed=True
                )
                assert getattr(raised, "is_error", False) is True
                assert await app.list_jobs_async() == [await app.get_job_async(created.task_id)]

        asyncio.run(scenario())


def test_stdio_commands_refuse_what_is_not_an_app() -> None:
    """`longcall mcp` and `python -m longcall.mcp` name a bad --app instead of serving."""
    from click.testing import CliRunner

    from longcall.cli.main import main
    from longcall.mcp.__main__ import main as module_main

    not_app = CliRunner().invoke(main, ["mcp", "--app", "json:dumps"])
    assert not_app.exit_code == 2
    assert "json:dumps is not a longcall.App" in not_app.output
    missing = CliRunner().invoke(main, ["mcp", "--app", "no_such_module:app"])
    assert missing.exit_code == 2
    assert "cannot import 'no_such_module'" in missing.output
    with pytest.raises(SystemExit, match="does not name a longcall App"):
        module_main(["--app", "json:dumps"])
    with pytest.raises(SystemExit, match=r"must look like package\.module:name"):
        module_main(["--app", "json"])
