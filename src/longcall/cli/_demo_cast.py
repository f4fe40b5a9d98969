"""Who plays in the demo: Ana, her session, her report jobs, and the scripted conversation.

Shared by the story (:mod:`longcall.cli._demo`), its google-adk cast
(:mod:`longcall.cli._demo_adk`) and the live service demo.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol

from longcall.agents import AgentEvent, AgentRunner
from longcall.app import App
from longcall.core.jobs import job_id_for
from longcall.testing.scripted import Rule, ScriptedAgent

START = dt.datetime(2026, 11, 30, 10, 0, 0, tzinfo=dt.UTC).timestamp()
USER, SESSION = "ana", "session-ana-1"
# Ana's report jobs: her tool's key in her namespace (see longcall.job_id_for).
EMEA = job_id_for("report:2026-Q3:EMEA", USER)
APAC = job_id_for("report:2026-Q3:APAC", USER)


class Conversation(Protocol):
    """One user's session with an agent, as the demo drives it."""

    runner: AgentRunner  # what the deliverer delivers through

    async def ask(self, text: str) -> list[AgentEvent]: ...

    async def history(self) -> list[AgentEvent]: ...


ReportTool = Callable[..., dict[str, Any]]
RULES = [
    Rule(
        r"sales report for (\d{4}-Q[1-4]) (\w+)",
        calls=[("start_sales_report", lambda m: {"quarter": m[1], "region": m[2].upper()})],
    ),
    Rule(r"vacation", reply="You have 12 vacation days left this year."),
]


class ScriptedConversation:
    """The built-in scripted agent, sessions in longcall's own store."""

    def __init__(self, app: App, tool: ReportTool) -> None:
        app.long_running(key="report:{quarter}:{region}", deadline="45m")(tool)
        self.app = app
        self.agent = ScriptedAgent(app, rules=RULES)
        self.runner: AgentRunner = self.agent

    async def ask(self, text: str) -> list[AgentEvent]:
        return await self.app.run_turn_async(
            self.agent, user_id=USER, session_id=SESSION, text=text
        )

    async def history(self) -> list[AgentEvent]:
        return await self.agent.history(SESSION)
