"""examples/openai_agents_agent runs as its README says: a real process, the CLI from outside."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_examples import EXAMPLES, Example, cli, has_module, needs, printed_command

FINISHED = "agent: export_data has finished: url https://example.com/export.csv."


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user's environment in a fresh folder: the default store there, no model key."""
    clean = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return {**clean, "LONGCALL_DATABASE_URL": f"sqlite:///{tmp_path / 'longcall.db'}"}


@pytest.fixture
def started() -> Iterator[list[Example]]:
    """Examples a test starts; any still running at its end is killed."""
    examples: list[Example] = []
    yield examples
    for example in examples:
        example.kill()


def start(started: list[Example], tmp_path: Path, env: dict[str, str]) -> Example:
    needs(has_module("agents"), "openai-agents is not installed (extra 'openai-agents')")
    script = EXAMPLES / "openai_agents_agent" / "agent.py"
    example = Example([sys.executable, str(script), "Export my data as CSV"], tmp_path, env)
    started.append(example)
    return example


def test_the_paused_run_hears_the_export_finished_from_another_process(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """The run pauses on the call; the CLI completes the job; the agent answers once."""
    agent = start(started, tmp_path, env)
    assert agent.until("paused: ").startswith("paused: export_data waits on job export:")
    finish = agent.until("finish it: ")
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True
    assert agent.until("agent: ") == FINISHED
    assert agent.finish() == 0, agent.output


def test_a_killed_agent_resumes_its_paused_run_when_started_again(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """Killed while waiting, the job completed meanwhile: started again, it asks nothing twice
    and resumes the paused run from the files on disk."""
    first = start(started, tmp_path, env)
    finish = first.until("finish it: ")
    first.kill()
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = start(started, tmp_path, env)
    assert again.finish() == 0, again.output
    assert "paused: " not in again.output  # no second user turn, no second job
    assert again.seen[-1] == FINISHED
