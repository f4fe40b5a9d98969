"""The App the MCP server tests serve (``--app mcp_app:app``), on LONGCALL_DATABASE_URL.

Its ``report`` tool only records the request; the tests complete the job from outside.
``MCP_TEST_CANCELS`` names a file that the ``on_cancel`` hook appends each job id to.
"""

from __future__ import annotations

import os

from longcall import App, JobHandle

app = App()


def note_cancel(job: JobHandle) -> None:
    path = os.environ.get("MCP_TEST_CANCELS")
    if path:
        with open(path, "a", encoding="utf-8") as cancels:
            cancels.write(job.id + "\n")


@app.long_running(on_cancel=note_cancel)
def report(topic: str, pages: int = 1) -> str:
    """Write a report on a topic."""
    return f"a {pages}-page report on {topic} is being written"
