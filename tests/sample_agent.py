"""A user's agent module, for tests that run `longcall worker` or `longcall serve` as processes.

:data:`SOURCE` is written to a temporary directory and loaded by the process with
``--app sample_agent:app --agent sample_agent:runner``; :func:`ask_for_export` plays the
user's turn from the test process, on the same database, so the process has a job to resume.
"""

from __future__ import annotations

import os
from pathlib import Path

import longcall

SOURCE = '''
import os
import longcall

app = longcall.App(os.environ["LONGCALL_DATABASE_URL"])


@app.long_running(key="export:{fmt}")
def export(fmt: str) -> str:
    """Exports data."""
    return "started"


rules = [longcall.Rule("export", calls=[("export", {"fmt": "csv"})])]
runner = longcall.ScriptedAgent(app, rules=rules)
'''


def install(directory: Path, url: str) -> dict[str, str]:
    """Write the module into ``directory``; the environment a process needs to load it."""
    (directory / "sample_agent.py").write_text(SOURCE)
    return {**os.environ, "LONGCALL_DATABASE_URL": url, "PYTHONPATH": str(directory)}


def ask_for_export(app: longcall.App, *, user_id: str, session_id: str) -> longcall.ScriptedAgent:
    """Register the same tool on ``app`` and play the user's turn that starts export:csv."""

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports data."""
        return "started"

    agent = longcall.ScriptedAgent(
        app, rules=[longcall.Rule("export", calls=[("export", {"fmt": "csv"})])]
    )
    app.run_turn(agent, user_id=user_id, session_id=session_id, text="export please")
    return agent
