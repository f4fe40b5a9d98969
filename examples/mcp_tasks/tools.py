"""A long-running tool served as a durable MCP task: `longcall serve --app tools:app`.

The tool hands a document to a translation agency and returns at once; the agency's answer
arrives hours later (here: from client.py, standing in for the agency's webhook) and becomes
the task's result. The job row is the task, so the server may restart in between.
"""

from __future__ import annotations

import os

from longcall import App, JobHandle

app = App(os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///mcp_tasks.db"))


def withdraw(job: JobHandle) -> None:
    # A real tool would tell the agency to stop; the MCP client cancelled the task.
    print(f"asking the agency to drop {job.id}", flush=True)


@app.long_running(deadline="2d", on_cancel=withdraw)
def translate(document: str, language: str) -> str:
    """Have a document translated by a human agency (takes hours)."""
    # Submit the work here, passing the job id on so the agency's answer can name it.
    return f"sent {document!r} to the agency for {language}"
