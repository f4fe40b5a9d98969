"""The README's first screen is true: its tour runs, its links resolve, CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import longcall

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def block(marker: str) -> str:
    """The python block that follows ``<!-- marker: ... -->`` in the README."""
    found = re.search(rf"<!-- {marker}:.*?-->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert found, f"the README lost its {marker} block"
    return found.group(1)


def test_the_tour_runs_as_written_and_resumes_the_agent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tour's tool, turn, completion and delivery print what its comments promise."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(block("readme-tour"), str(README), "exec"), namespace)
    assert capsys.readouterr().out.splitlines() == [
        "I've started start_report. Report build started; typical time is 15-25 minutes."
        " I'll let you know when it's done.",
        "start_report has finished: rows 48213.",
    ]
    app: longcall.App = namespace["app"]
    [job] = app.list_jobs()
    assert job.delivered_at is not None and job.result == {"rows": 48213}
    app.close()


def test_the_tour_is_about_twenty_lines() -> None:
    """The tour stays a tour: at most 25 lines of code and comments."""
    assert len([ln for ln in block("readme-tour").splitlines() if ln.strip()]) <= 25


def test_every_relative_link_in_the_readme_names_a_file_of_the_repository() -> None:
    """The links to the docs pages and examples resolve, so none is left behind by a move."""
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text())
    assert len(targets) >= 15
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    """.ci/run holds the README's second command unchanged, so the README's command is the one
    that is known to pass."""
    commands = re.search(r"```sh\n(.*?)```", README.read_text(), re.S)
    assert commands, "the README lost its two commands"
    demo, tests = commands.group(1).strip().splitlines()
    assert demo.endswith("longcall demo") and tests.endswith("&& pytest")
    assert tests in (ROOT / ".ci" / "run").read_text()
