"""LangGraph integration: long-running tools that wait in interrupts, resumed by longcall.

::

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from longcall.langgraph import LangGraphRunner, long_running_tool, send_each_tool_call

    export = long_running_tool(app, export_data, key="export:{export_type}", deadline="1h")
    # a graph with a ToolNode([export, ...]); compile it with a checkpointer
    graph = builder.compile(checkpointer=AsyncSqliteSaver(conn))
    runner = LangGraphRunner(graph, app_name="exports")
    await app.run_turn_async(runner, user_id="ana", session_id="thread-1", text="...")
    worker = app.worker(runner)

Importing this module needs langgraph (``pip install 'longcall[langgraph]'``); importing
``longcall`` alone never imports it.
"""

try:
    import langgraph  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.langgraph needs langgraph; install it with: pip install 'longcall[langgraph]'"
    ) from exc

from longcall.langgraph.fencing import FencedCheckpointSaver
from longcall.langgraph.model import ScriptedChatModel
from longcall.langgraph.routing import send_each_tool_call
from longcall.langgraph.runner import CallsPending, LangGraphRunner
from longcall.langgraph.tool import LongcallTool, long_running_tool

__all__ = [
    "CallsPending",
    "FencedCheckpointSaver",
    "LangGraphRunner",
    "LongcallTool",
    "ScriptedChatModel",
    "long_running_tool",
    "send_each_tool_call",
]
