"""The folders in examples/ run as their READMEs say: real processes, the CLI, a real server.

Each example is started as a user starts it, in a fresh folder; the part "from outside" (the
CLI, a Node.js sender) runs as another process. Without google-adk or Node.js the matching
test skips, except under CI=true, where it fails.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from procs import free_port, wait_until_healthy

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BIN = Path(sys.executable).parent
LONGCALL = str(BIN / "longcall")
WAIT = 60  # seconds for any one step; an example that hangs fails instead of timing out


def needs(available: bool, reason: str) -> None:
    """Skip without the tool a test needs; under CI=true its absence is a failure."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: examples never skip)")
    pytest.skip(reason)


def has_module(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


class Example:
    """An example's script running in its own process, its output read line by line."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout as out:
            for line in out:
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def until(self, prefix: str) -> str:
        """The first line from now on that starts with ``prefix``."""
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                shown = self.output
                raise AssertionError(f"no {prefix!r} line within {WAIT} s:\n{shown}") from None
            if line is None:
                raise AssertionError(f"exited before a {prefix!r} line:\n{self.output}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def finish(self) -> int:
        """Wait for the exit; every line it printed is then in ``seen``."""
        code = self.proc.wait(timeout=WAIT)
        while (line := self.lines.get(timeout=WAIT)) is not None:
            self.seen.append(line)
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=WAIT)
        self.pump.join(timeout=WAIT)  # it closes the pipe


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user in a fresh folder: the default store there, no model key."""
    clean = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    return {**clean, "LONGCALL_DATABASE_URL": f"sqlite:///{tmp_path / 'longcall.db'}"}


@pytest.fixture
def started(tmp_path: Path, env: dict[str, str]) -> Iterator[list[Example]]:
    """Examples a test starts; any still running at its end is killed."""
    examples: list[Example] = []
    yield examples
    for example in examples:
        example.kill()


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``longcall ARGS`` from another terminal."""
    return subprocess.run(
        [LONGCALL, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=WAIT
    )


def printed_command(line: str, label: str) -> list[str]:
    """The command an example printed after ``label``, run with this environment's longcall."""
    words = shlex.split(line.removeprefix(label))
    assert words[0] == "longcall", line
    return words[1:]


# -- examples/adk_agent -----------------------------------------------------------------


def start_adk_agent(started: list[Example], tmp_path: Path, env: dict[str, str]) -> Example:
    example = Example(
        [sys.executable, str(EXAMPLES / "adk_agent" / "agent.py"), "Export my data as CSV"],
        tmp_path,
        env,
    )
    started.append(example)
    return example


def test_adk_agent_hears_the_export_finished_from_another_process(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """The ADK agent answers pending, then the finished export completed by the CLI, once."""
    needs(has_module("google.adk"), "google-adk is not installed (extra 'adk')")
    agent = start_adk_agent(started, tmp_path, env)
    assert "I've started export_data" in agent.until("agent: ")
    finish = agent.until("finish it: ")
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True
    answer = agent.until("agent: ")
    assert answer == "agent: export_data has finished: url https://example.com/export.csv."
    assert agent.finish() == 0, agent.output


def test_adk_agent_gets_its_answer_after_being_killed_while_it_waited(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """Killed while waiting, the job completed meanwhile: run again, it asks nothing twice and
    the session resumes with the result from the stores on disk."""
    needs(has_module("google.adk"), "google-adk is not installed (extra 'adk')")
    first = start_adk_agent(started, tmp_path, env)
    finish = first.until("finish it: ")
    first.kill()
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = start_adk_agent(started, tmp_path, env)
    assert again.finish() == 0, again.output
    assert "I've started" not in again.output  # no second user turn, no second job
    assert again.seen[-1] == "agent: export_data has finished: url https://example.com/export.csv."


# -- examples/approval_workflow ------------------------------------------------------------


def test_approval_workflow_waits_for_an_answer_from_another_terminal(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """The run asks, refuses an answer of the wrong shape (still waiting), then pays once
    approved through the command it printed."""
    run = Example(
        [sys.executable, str(EXAMPLES / "approval_workflow" / "approval.py"), "E-17", "120"],
        tmp_path,
        env,
    )
    started.append(run)
    assert run.until("run ").endswith("(submitted)")
    assert run.until("waiting: ") == "waiting: Pay 120.00 for expense E-17?"
    answer = printed_command(run.until("answer:  "), "answer:  ")
    wrong = [*answer[:-1], 'interrupt-1={"approved": "maybe"}']
    refused = cli(*wrong, env=env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "approved" in refused.stderr and "approver" in refused.stderr
    approved = cli(*answer, env=env, cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert run.finish() == 0, run.output
    assert run.seen[-1] == 'completed: {"paid": true, "payment": "payment-E-17", "by": "ana"}'


# -- examples/webhook_sender ---------------------------------------------------------------


def test_node_webhook_sender_completes_a_job_through_longcall_serve(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The README's steps: a source, a token, a job over REST, then send.mjs signs and posts
    its completion: applied, the same webhook-id again a duplicate, a wrong secret 401."""
    node = shutil.which("node")
    needs(node is not None, "Node.js is not installed")
    needs(has_module("longcall.server"), "the server extra is not installed")
    import httpx

    def operator(*args: str) -> str:
        done = cli(*args, env=env, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    operator("migrate")
    secret = json.loads(operator("hooks", "add", "batch", "-o", "json"))["secret"]
    token = json.loads(operator("tokens", "create", "--admin", "-o", "json"))["token"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [LONGCALL, "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_healthy(base, WAIT)
        auth = {"Authorization": f"Bearer {token}"}
        made = httpx.post(
            f"{base}/v1/jobs", headers=auth, json={"toolName": "report", "jobId": "report-1"}
        )
        assert made.status_code == 201, made.text

        def send(webhook_secret: str) -> subprocess.CompletedProcess[str]:
            args = [str(node), str(EXAMPLES / "webhook_sender" / "send.mjs"), base, "batch"]
            return subprocess.run(
                [*args, "report-1", '{"rows": 48213}'],
                env={**env, "WEBHOOK_SECRET": webhook_secret, "WEBHOOK_ID": "msg_1"},
                capture_output=True,
                text=True,
                timeout=WAIT,
            )

        first = send(secret)
        assert (first.returncode, first.stdout.strip()) == (
            0,
            '200 {"outcome":"applied","jobId":"report-1"}',
        ), first.stderr
        again = send(secret)
        assert again.stdout.strip() == '200 {"outcome":"duplicate","jobId":"report-1"}'
        forged = send("whsec_" + "A" * 44)
        assert forged.returncode == 1 and forged.stdout.startswith("401 "), forged.stdout
        job = httpx.get(f"{base}/v1/jobs/report-1", headers=auth).json()
        assert (job["state"], job["result"]) == ("succeeded", {"rows": 48213})
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=WAIT) == 0
