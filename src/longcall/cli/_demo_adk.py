"""The worked example on google-adk: ``longcall demo --adk``.

The agent is a real ADK ``Runner`` with longcall's tool, plugin and resume runner. The model is
the offline :class:`~longcall.adk.ScriptedLlm` unless ``GOOGLE_API_KEY`` is set, in which case
it is Gemini (``LONGCALL_DEMO_MODEL``, default ``gemini-2.5-flash``): the job table's checks
hold either way; only the wording of the replies changes.
"""

from __future__ import annotations

import os

from google.adk.agents import LlmAgent
from google.adk.apps import App as AdkApp
from google.adk.models.base_llm import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from longcall.adk.model import ScriptedLlm
from longcall.adk.plugin import LongcallPlugin
from longcall.adk.runner import AdkAgentRunner, to_agent_event
from longcall.adk.tool import long_running_tool
from longcall.agents import AgentEvent, AgentRunner
from longcall.app import App
from longcall.cli._demo_cast import RULES, SESSION, USER, ReportTool

APP_NAME = "longcall-demo"
INSTRUCTION = (
    "You help with sales reports. To build one, call start_sales_report with the quarter "
    "(like 2026-Q3) and the region code, then tell the user it has started. When a report "
    "finishes, give the user its URL and row count. If it expired, apologise and offer to "
    "start it again. Answer other questions briefly."
)


def model() -> str | BaseLlm:
    """Gemini when an API key is set, otherwise the offline scripted model."""
    if os.environ.get("GOOGLE_API_KEY"):
        return os.environ.get("LONGCALL_DEMO_MODEL", "gemini-2.5-flash")
    return ScriptedLlm(rules=RULES)


def model_name() -> str:
    chosen = model()
    return chosen if isinstance(chosen, str) else "the offline scripted model"


class AdkConversation:
    """One user's ADK session, its turns taken through the real Runner."""

    def __init__(self, app: App, tool: ReportTool) -> None:
        report = long_running_tool(app, tool, key="report:{quarter}:{region}", deadline="45m")
        agent = LlmAgent(name="assistant", model=model(), instruction=INSTRUCTION, tools=[report])
        self.sessions = InMemorySessionService()
        self.adk_runner = Runner(
            app=AdkApp(name=APP_NAME, root_agent=agent, plugins=[LongcallPlugin(app)]),
            session_service=self.sessions,
        )
        self.runner: AgentRunner = AdkAgentRunner(self.adk_runner)
        self._started = False

    async def ask(self, text: str) -> list[AgentEvent]:
        if not self._started:
            await self.sessions.create_session(app_name=APP_NAME, user_id=USER, session_id=SESSION)
            self._started = True
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            to_agent_event(event)
            async for event in self.adk_runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message
            )
        ]

    async def history(self) -> list[AgentEvent]:
        session = await self.sessions.get_session(
            app_name=APP_NAME, user_id=USER, session_id=SESSION
        )
        return [to_agent_event(e) for e in session.events] if session is not None else []
