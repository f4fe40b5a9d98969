"""Helpers for tests that run `adk api_server` (and longcall beside it) as real processes:
an agents folder, a free port, a child process, polling, and reading a session's answers."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
APP_NAME = "reports"  # the agent folder's name is the ADK app name
USER = "ana"

AGENT_PY = '''
"""A report agent: a scripted model and one longcall long-running tool."""
import os

import longcall
from google.adk.agents import LlmAgent
from longcall import adk

app = longcall.App(os.environ["LONGCALL_DATABASE_URL"])


def start_report(region: str) -> dict:
    """Starts a sales report build for a region code."""
    return {"message": "Report build started."}


report = adk.long_running_tool(app, start_report, key="report:{region}")
root_agent = LlmAgent(
    name="reporter",
    model=adk.ScriptedLlm(
        rules=[
            longcall.Rule(
                r"report for (\\w+)", calls=[("start_report", lambda m: {"region": m[1]})]
            )
        ]
    ),
    tools=[report],
)
'''


def write_agents(
    root: Path, names: tuple[str, ...] = (APP_NAME,), agent_py: str = AGENT_PY
) -> Path:
    """An agents folder as `adk api_server` takes it: one package per app."""
    agents = root / "agents"
    for name in names:
        (agents / name).mkdir(parents=True)
        (agents / name / "__init__.py").write_text("from . import agent\n")
        (agents / name / "agent.py").write_text(textwrap.dedent(agent_py))
    return agents


def wait_for(what: str, check: Callable[[], Any], seconds: float = 30) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            got = check()
        except httpx.TransportError:
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process logging to ``log``, stopped with SIGTERM (then SIGKILL) at the end."""
    with log.open("ab") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def model_texts(session: dict[str, Any]) -> list[str]:
    """The model's texts in a session as ADK's server shows it, in order."""
    return [
        part["text"]
        for event in session["events"]
        if event.get("author") != "user"
        for part in (event.get("content") or {}).get("parts") or []
        if part.get("text")
    ]
