"""examples/pydantic_ai_agent runs as its README says: the agent in one process, the CLI
completing the job from another, and a restart that resumes from the database."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parent.parent / "examples" / "pydantic_ai_agent" / "agent.py"
LONGCALL = str(Path(sys.executable).parent / "longcall")
WAIT = 60  # seconds for any one step
URL = "https://example.com/export.csv"

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (extra 'pydantic-ai')")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user's environment in a fresh folder: the default store there, no model configured."""
    clean = {k: v for k, v in os.environ.items() if k != "PYDANTIC_AI_MODEL"}
    return {**clean, "LONGCALL_DATABASE_URL": f"sqlite:///{tmp_path / 'longcall.db'}"}


def start(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(AGENT), "Export my data as CSV"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_command(proc: subprocess.Popen[str]) -> tuple[list[str], list[str]]:
    """The lines up to the printed "finish it:" command, and that command's arguments."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if line.startswith("finish it: "):
            words = shlex.split(line.removeprefix("finish it: "))
            assert words[0] == "longcall", line
            return seen, words[1:]
    raise AssertionError(
        "the example exited before printing how to finish its job:\n" + "\n".join(seen)
    )


def complete(args: list[str], tmp_path: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [LONGCALL, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True


def test_the_agent_hears_the_export_finished_from_another_process(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The call is deferred; the CLI's completion resumes it and the agent gives the link."""
    proc = start(tmp_path, env)
    try:
        seen, args = finish_command(proc)
        assert "agent: (calls export_data {'export_type': 'csv'}, deferred)" in seen
        complete(args, tmp_path, env)
        out, _ = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, out
        assert out.strip().splitlines()[-1] == f"agent: Your export is ready: {URL}"
    finally:
        proc.kill()


def test_a_restart_after_a_kill_resumes_from_the_database(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Killed while it waits, the job completed meanwhile: run again, no second call, and the
    conversation resumes from longcall's database."""
    first = start(tmp_path, env)
    try:
        _, args = finish_command(first)
    finally:
        first.kill()
        first.communicate(timeout=WAIT)
    complete(args, tmp_path, env)
    again = start(tmp_path, env)
    try:
        out, _ = again.communicate(timeout=WAIT)
    finally:
        again.kill()
    assert again.returncode == 0, out
    assert "calls export_data" not in out  # no second user turn, no second job
    assert out.strip().splitlines()[-1] == f"agent: Your export is ready: {URL}"
