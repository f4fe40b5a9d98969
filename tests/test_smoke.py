"""A first end-to-end pass on both backends."""

from __future__ import annotations

import asyncio

import longcall
from longcall.testing import FakeClock

CSV = longcall.job_id_for("export:csv", "u")  # user u's export job


def test_tool_complete_resume_roundtrip(db_url: str) -> None:
    """A job started by a tool, completed from Python, reaches the session exactly once."""
    clock = FakeClock()
    with longcall.App(db_url, clock=clock) as app:

        @app.long_running(key="export:{fmt}", deadline="10m")
        def export(fmt: str) -> str:
            """Exports data."""
            return "Export started."

        agent = longcall.ScriptedAgent(
            app, rules=[longcall.Rule("export", calls=[("export", {"fmt": "csv"})])]
        )

        async def scenario() -> None:
            await app.run_turn_async(agent, user_id="u", session_id="s", text="export please")
            assert (await app.complete_async(CSV, {"rows": 3})).changed
            assert await app.deliverer(agent).run_once() == 1
            assert await app.deliverer(agent).run_once() == 0

        asyncio.run(scenario())
        job = app.get_job(CSV)
        assert job.delivery is longcall.Delivery.DELIVERED
