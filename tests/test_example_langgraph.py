"""examples/langgraph_agent runs as its README says: a real process, the CLI from outside.

Without langgraph the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_examples import (  # the fixtures `env` and `started` come along
    EXAMPLES,
    Example,
    cli,
    env,
    has_module,
    needs,
    printed_command,
    started,
)

__all__ = ["env", "started"]
MODEL_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def start_langgraph_agent(started: list[Example], tmp_path: Path, env: dict[str, str]) -> Example:
    offline = {k: v for k, v in env.items() if k not in MODEL_KEYS}
    example = Example(
        [sys.executable, str(EXAMPLES / "langgraph_agent" / "agent.py"), "Export my data as CSV"],
        tmp_path,
        offline,
    )
    started.append(example)
    return example


def test_langgraph_agent_hears_the_export_finished_from_another_process(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """The graph's call waits pending, the CLI completes the job, the thread resumes once."""
    needs(has_module("langgraph"), "langgraph is not installed (extra 'langgraph')")
    agent = start_langgraph_agent(started, tmp_path, env)
    assert agent.until("pending: ") == "pending: export_data: Exporting csv data."
    finish = agent.until("finish it: ")
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True
    answer = agent.until("agent: ")
    assert answer == "agent: export_data has finished: url https://example.com/export.csv."
    assert agent.finish() == 0, agent.output


def test_langgraph_agent_gets_its_answer_after_being_killed_while_it_waited(
    tmp_path: Path, env: dict[str, str], started: list[Example]
) -> None:
    """Killed while waiting, the job completed meanwhile: run again, it calls nothing twice and
    the thread resumes from the checkpoint on disk."""
    needs(has_module("langgraph"), "langgraph is not installed (extra 'langgraph')")
    first = start_langgraph_agent(started, tmp_path, env)
    finish = first.until("finish it: ")
    first.kill()
    done = cli(*printed_command(finish, "finish it: "), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = start_langgraph_agent(started, tmp_path, env)
    assert again.finish() == 0, again.output
    assert "pending: export_data: Exporting csv data." not in again.seen
    assert again.seen[-1] == "agent: export_data has finished: url https://example.com/export.csv."
