"""OpenAI Agents SDK integration: long-running tools that pause and resume real SDK runs.

::

    from agents import Agent
    from longcall.openai_agents import OpenAIAgentsRunner, long_running_tool

    export = long_running_tool(app, export_data, key="export:{export_type}", deadline="1h")
    agent = Agent(name="exporter", model="gpt-4.1", tools=[export])
    runner = OpenAIAgentsRunner(agent, path="conversations.db")
    events = await app.run_turn_async(runner, user_id="u1", session_id="s1", text="...")
    worker = app.worker(runner)  # resumes each paused run with its jobs' results

Importing this module needs the SDK (``pip install 'longcall[openai-agents]'``); importing
``longcall`` alone never imports it.
"""

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.openai_agents needs the OpenAI Agents SDK; install it with: "
        "pip install 'longcall[openai-agents]'"
    ) from exc

from longcall.openai_agents.model import ScriptedModel
from longcall.openai_agents.runner import OpenAIAgentsRunner
from longcall.openai_agents.tool import LongcallFunctionTool, long_running_tool

__all__ = [
    "LongcallFunctionTool",
    "OpenAIAgentsRunner",
    "ScriptedModel",
    "long_running_tool",
]
