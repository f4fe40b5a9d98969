"""The tests' side of the tasks extension: longcall's own client half (``longcall.mcp.client``,
over the SDK's ``ClientSession``), plus a session that does not declare the extension.

The extension claims the ``task`` result shape without resolving it, so a test holds the
task id and drives ``tasks/get`` / ``tasks/cancel`` itself. FastMCP's own client checks the
server independently (tests/test_mcp_tasks.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from longcall.mcp.client import CreatedTask, TasksClientExtension, call_as_task
from longcall.mcp.client import cancel_task as cancel
from longcall.mcp.client import get_task as get
from longcall.mcp.client import update_task as update
from longcall.mcp.tasks import TASKS_EXTENSION as TASKS
from procs import free_port, wait_until_healthy

TasksExtension = TasksClientExtension

__all__ = [
    "TASKS",
    "TasksExtension",
    "cancel",
    "create",
    "get",
    "http_session",
    "run_example_client",
    "update",
]


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


def run_example_client(tmp_path: Path, app: str, script: str) -> subprocess.CompletedProcess[str]:
    """examples/mcp_tasks as its README runs it: a token, ``longcall serve --app APP`` on a
    free port, then ``python SCRIPT URL`` against its /mcp; the client's finished process."""
    folder = Path(__file__).resolve().parent.parent / "examples" / "mcp_tasks"
    longcall = str(Path(sys.executable).parent / "longcall")
    env = {
        **os.environ,
        "LONGCALL_DATABASE_URL": f"sqlite:///{tmp_path / 'mcp_tasks.db'}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def operator(*args: str) -> str:
        done = subprocess.run(
            [longcall, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    operator("migrate")
    token = json.loads(operator("tokens", "create", "--user", "alice", "-o", "json"))["token"]
    port = free_port()
    with (tmp_path / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            [longcall, "serve", "--app", app, "--port", str(port)],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}")
        return subprocess.run(
            [sys.executable, script, f"http://127.0.0.1:{port}/mcp"],
            cwd=folder,
            env={**env, "LONGCALL_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(10)
