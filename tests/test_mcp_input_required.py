"""A workflow run served as an MCP task that asks for input (``input_required``), driven by
the MCP SDK's client against real ``longcall serve`` processes (tests/mcp_workflow_app.py).

The run executes in the server's own worker loops; its interrupts are the task's
``inputRequests``; ``tasks/update`` answers them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("longcall.mcp", reason="the mcp extra is not installed")
pytest.importorskip("longcall.server", reason="the server extra is not installed")

from mcp.client import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from longcall import App, RunStatus
from longcall.mcp.run_wire import answer_of, requested_schema
from mcp_client import cancel, create, get, http_session, run_example_client, update
from procs import free_port, wait_until_healthy

HERE = Path(__file__).resolve().parent
LONGCALL = str(Path(sys.executable).parent / "longcall")
APPROVAL = {"interrupt-1": {"action": "accept", "content": {"approved": True, "approver": "ana"}}}
ORDER = {"id": "A-17", "amount": 42.0}

Serve = Callable[[str], str]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start `longcall serve --app mcp_workflow_app:app` on a free port; all are reaped."""
    started: list[subprocess.Popen[bytes]] = []

    def start(url: str) -> str:
        port = free_port()
        env = {**os.environ, "LONGCALL_DATABASE_URL": url, "PYTHONPATH": str(HERE)}
        with (tmp_path / f"serve-{port}.log").open("wb") as log:
            proc = subprocess.Popen(
                [LONGCALL, "serve", "--app", "mcp_workflow_app:app", "--port", str(port)],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=log,
            )
        started.append(proc)
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        return base

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def _tokens(url: str) -> dict[str, str]:
    with App(url) as app:
        return {user: app.access.create_token(user_id=user)[1] for user in ("alice", "mallory")}


def _run_status(url: str, run_id: str) -> RunStatus:
    with App(url) as app:
        return app.get_run(run_id).status


async def _until(session: ClientSession, task_id: str, status: str) -> dict[str, Any]:
    """Poll tasks/get until the task has ``status`` (or 20 s pass)."""
    deadline = time.monotonic() + 20
    while True:
        task = await get(session, task_id)
        if task["status"] == status or time.monotonic() > deadline:
            assert task["status"] == status, task
            return task
        await asyncio.sleep(0.1)


def test_wire_wraps_a_non_object_question() -> None:
    assert requested_schema({"type": "string"}) == {
        "type": "object",
        "properties": {"value": {"type": "string"}},
        "required": ["value"],
    }
    assert answer_of({"type": "string"}, {"value": "hi"}) == "hi"
    shaped = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert requested_schema(shaped) is shaped
    assert answer_of(shaped, {"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="value"):
        answer_of(None, {"other": 1})


def test_run_task_asks_is_answered_and_completes(db_url: str, serve: Serve) -> None:
    """The run's questions come as input requests with prompt and schema; a wrong answer is
    refused and changes nothing; a right one resumes the run; a repeat is a no-op."""
    tokens = _tokens(db_url)
    base = serve(db_url)

    async def scenario() -> None:
        async with http_session(base, tokens["alice"]) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools["refund"].input_schema["properties"]) == {"id", "amount"}
            created = await create(session, "refund", ORDER)
            assert created.task_id.startswith("run-")
            asked = await _until(session, created.task_id, "input_required")
            request = asked["inputRequests"]["interrupt-1"]
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "Refund 42.0 for A-17?"
            schema = request["params"]["requestedSchema"]
            assert set(schema["properties"]) == {"approved", "approver"}
            assert schema["properties"]["approved"]["type"] == "boolean"

            wrong = {"interrupt-1": {"action": "accept", "content": {"approved": "maybe"}}}
            with pytest.raises(MCPError) as refused:
                await update(session, created.task_id, wrong)
            assert refused.value.error.code == INVALID_PARAMS
            assert "interrupt-1" in refused.value.error.message
            assert "still waits" in refused.value.error.message
            declined = {"interrupt-1": {"action": "decline"}}
            with pytest.raises(MCPError, match="action is 'decline'"):
                await update(session, created.task_id, declined)
            assert await asyncio.to_thread(_run_status, db_url, created.task_id) == (
                RunStatus.WAITING_INPUT
            )
            assert (await get(session, created.task_id))["status"] == "input_required"

            await update(session, created.task_id, APPROVAL)
            await update(session, created.task_id, APPROVAL)  # a duplicate: ignored
            second = await _until(session, created.task_id, "input_required")
            while "interrupt-2" not in second["inputRequests"]:
                second = await _until(session, created.task_id, "input_required")
            assert list(second["inputRequests"]) == ["interrupt-2"]
            note = second["inputRequests"]["interrupt-2"]["params"]
            assert note["message"] == "A note for the customer?"
            assert note["requestedSchema"]["properties"]["value"]["type"] == "string"
            await update(
                session,
                created.task_id,
                {"interrupt-2": {"action": "accept", "content": {"value": "sorry"}}},
            )
            done = await _until(session, created.task_id, "completed")
            expected = {"refunded": True, "by": "ana", "note": "sorry"}
            assert done["result"]["structuredContent"] == expected
            # Answers after the end change nothing either.
            await update(session, created.task_id, APPROVAL)
            again = await get(session, created.task_id)
            assert (again["status"], again["result"]) == ("completed", done["result"])

    asyncio.run(scenario())


def test_run_task_cancelled_and_hidden_from_others(db_url: str, serve: Serve) -> None:
    tokens = _tokens(db_url)
    base = serve(db_url)

    async def scenario() -> None:
        async with (
            http_session(base, tokens["alice"]) as alice,
            http_session(base, tokens["mallory"]) as mallory,
        ):
            created = await create(alice, "refund", ORDER)
            await _until(alice, created.task_id, "input_required")
            for attempt in (
                get(mallory, created.task_id),
                update(mallory, created.task_id, APPROVAL),
                cancel(mallory, created.task_id),
            ):
                with pytest.raises(MCPError, match="not found"):
                    await attempt
            await cancel(alice, created.task_id)
            cancelled = await get(alice, created.task_id)
            assert cancelled["status"] == "cancelled"
            await update(alice, created.task_id, APPROVAL)  # too late: ignored
            assert (await get(alice, created.task_id))["status"] == "cancelled"
            with pytest.raises(MCPError, match="bad input"):
                await create(alice, "refund", {"id": "A-18"})

    asyncio.run(scenario())
    assert _run_status(db_url, _only_run(db_url)) is RunStatus.CANCELLED


def _only_run(url: str) -> str:
    with App(url) as app:
        runs = app.list_runs()
        assert len(runs) == 1, runs
        return runs[0].run_id


def test_answered_from_another_server_process(pg_url: str, serve: Serve) -> None:
    """On PostgreSQL: asked through one server, answered through another (twice at once:
    one answer is taken), completed as seen from the first."""
    tokens = _tokens(pg_url)
    first, second = serve(pg_url), serve(pg_url)

    async def scenario() -> None:
        async with (
            http_session(first, tokens["alice"]) as one,
            http_session(second, tokens["alice"]) as other,
        ):
            created = await create(one, "refund", ORDER)
            await _until(other, created.task_id, "input_required")
            rival = {
                "interrupt-1": {
                    "action": "accept",
                    "content": {"approved": False, "approver": "bo"},
                }
            }
            await asyncio.gather(
                update(other, created.task_id, APPROVAL), update(one, created.task_id, rival)
            )
            settled = await _until_not_working(one, created.task_id)
            if settled["status"] == "input_required":
                # ana's approval was taken: the run asks for the note next.
                await update(
                    other,
                    created.task_id,
                    {"interrupt-2": {"action": "accept", "content": {"value": "ok"}}},
                )
                done = await _until(one, created.task_id, "completed")
                assert done["result"]["structuredContent"]["by"] == "ana"
            else:
                assert settled["result"]["structuredContent"] == {"refunded": False, "by": "bo"}

    asyncio.run(scenario())


async def _until_not_working(session: ClientSession, task_id: str) -> dict[str, Any]:
    """The task once it has moved past interrupt-1 (asking interrupt-2, or completed)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        task = await get(session, task_id)
        if task["status"] == "completed" or "interrupt-2" in task.get("inputRequests", {}):
            return task
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} did not move past interrupt-1")


def test_fastmcp_client_answers_through_its_elicitation_handler(
    sqlite_url: str, serve: Serve
) -> None:
    """FastMCP's own tasks client, unchanged: its transparent call_tool polls the run's task,
    answers each input request with its elicitation handler (tasks/update) and returns the
    run's result."""
    fastmcp = pytest.importorskip("fastmcp")
    pytest.importorskip("fastmcp_tasks")
    tokens = _tokens(sqlite_url)
    base = serve(sqlite_url)
    asked: list[str] = []

    async def answer(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        if "note" in message:
            return {"value": "thanks"}
        return {"approved": True, "approver": "fm"}

    async def scenario() -> Any:
        async with fastmcp.Client(
            f"{base}/mcp", auth=tokens["alice"], elicitation_handler=answer
        ) as client:
            return await client.call_tool("refund", ORDER, timeout=30)

    result = asyncio.run(scenario())
    assert result.structured_content == {"refunded": True, "by": "fm", "note": "thanks"}
    assert asked == ["Refund 42.0 for A-17?", "A note for the customer?"]


def test_example_approvals_runs_as_its_readme_says(tmp_path: Path) -> None:
    """examples/mcp_tasks: `longcall serve --app approvals:app`, then approve_client.py
    starts the workflow, sees its question and answers it."""
    client = run_example_client(tmp_path, "approvals:app", "approve_client.py")
    assert client.returncode == 0, client.stderr
    lines = client.stdout.splitlines()
    assert lines[0].endswith(": working"), client.stdout
    assert lines[1:] == [
        "interrupt-1: Refund 42.0 for A-17? ['approved', 'approver']",
        f"{lines[0].split(':')[0]}: completed: {{'refunded': True, 'by': 'ana'}}",
    ], client.stdout


def test_wire_a_waiting_run_without_open_questions_is_working() -> None:
    from longcall.core.runs import Interrupt, Run
    from longcall.mcp.run_wire import detailed_run_task

    run = Run(
        run_id="run-1", workflow_id="refund", status=RunStatus.WAITING_INPUT, input=None,
        result=None, error=None, state={}, user_id="alice", job_id=None, cron_id=None,
        concurrency_key=None, idempotency_key=None, attempts=0, executions=1, max_retries=0,
        timeout_secs=None, errors=[], cancel_requested=False, holder=None,
        lease_expires_at=None, created_at=1.0, updated_at=2.0, finished_at=None,
    )  # fmt: skip
    answered = Interrupt("interrupt-1", "ok?", None, True, True, True, None, 1.0, 2.0)
    assert detailed_run_task(run, [answered])["status"] == "working"
    asked = Interrupt("interrupt-1", "ok?", None, None, False, False, None, 1.0, None)
    task = detailed_run_task(run, [asked])
    assert task["status"] == "input_required"
    assert task["inputRequests"]["interrupt-1"]["params"]["requestedSchema"]["required"] == [
        "value"
    ]
