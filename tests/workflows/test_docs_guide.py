"""The workflow guide's example (docs/workflows.md) runs as written, and really is durable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import longcall

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


def guide_workflow_block() -> str:
    """The python block that follows the docs-workflow marker."""
    text = GUIDE.read_text()
    match = re.search(r"<!-- docs-workflow:.*?-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "the workflow guide lost its example"
    return match.group(1)


def test_guide_workflow_runs_suspends_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refund workflow waits on its question, then completes once answered, its finished
    task not run again."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(guide_workflow_block(), str(GUIDE), "exec"), namespace)
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
