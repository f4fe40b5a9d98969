"""The README's workflow example runs as written, and really is durable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import longcall

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_workflow_block() -> str:
    text = README.read_text()
    match = re.search(r"<!-- readme-workflow:.*?-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its workflow example"
    return match.group(1)


def test_readme_workflow_runs_suspends_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(readme_workflow_block(), str(README), "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "waiting_input",
        "completed {'refunded': True, 'refundId': 'refund-A-17'}",
    ]
    app: longcall.App = namespace["app"]
    details = app.get_run(namespace["run"].run_id)
    # fetch_order ran once (skipped on resume), then issue_refund: two checkpoints.
    assert [(s.position, s.name, s.attempts) for s in details.steps] == [
        (1, "fetch_order", 1),
        (2, "issue_refund", 1),
    ]
    assert details.interrupts[0].key == "interrupt-1"
    assert details.interrupts[0].prompt == "Refund 42.0 for A-17?"
    assert [(e.kind, e.data) for e in details.events] == [
        ("approved", {"order": "A-17", "by": "ana"})
    ]
    app.close()
