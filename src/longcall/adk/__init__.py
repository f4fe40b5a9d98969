"""google-adk integration: long-running tools that resume real ADK sessions.

::

    from google.adk.apps import App as AdkApp
    from longcall.adk import AdkAgentRunner, LongcallPlugin, long_running_tool

    export = long_running_tool(app, export_data, key="export:{export_type}", deadline="1h")
    agent = Agent(name="exporter", model="gemini-2.5-flash", tools=[export])
    adk_app = AdkApp(name="exports", root_agent=agent, plugins=[LongcallPlugin(app)])
    runner = Runner(app=adk_app, session_service=sessions)
    worker = app.worker(AdkAgentRunner(runner))
    # or, when the agents run in `adk api_server` (with the plugin) somewhere else:
    worker = app.worker(AdkServerRunner("http://127.0.0.1:8000", app_name="exports"))

Importing this module needs google-adk (``pip install 'longcall[adk]'``); importing
``longcall`` alone never imports it.
"""

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.adk needs google-adk; install it with: pip install 'longcall[adk]'"
    ) from exc

from longcall.adk.model import ScriptedLlm
from longcall.adk.plugin import LongcallPlugin
from longcall.adk.runner import AdkAgentRunner
from longcall.adk.server_runner import AdkServerRunner
from longcall.adk.tool import LongcallTool, long_running_tool

__all__ = [
    "AdkAgentRunner",
    "AdkServerRunner",
    "LongcallPlugin",
    "LongcallTool",
    "ScriptedLlm",
    "long_running_tool",
]
