"""pydantic-ai integration: long-running tools deferred with ``CallDeferred`` and resumed from
longcall's own database with ``DeferredToolResults``.

::

    from pydantic_ai import Agent
    from pydantic_ai.tools import DeferredToolRequests
    from longcall.pydantic_ai import PydanticAiRunner, long_running_tool

    export = long_running_tool(app, export_data, key="export:{export_type}", deadline="1h")
    agent = Agent("openai:gpt-4o", tools=[export], output_type=[str, DeferredToolRequests])
    runner = PydanticAiRunner(agent, app, app_name="exports")
    await app.run_turn_async(runner, user_id="u", session_id="s", text="Export my data")
    worker = app.worker(runner)  # delivers each job's result into its session

Importing this module needs pydantic-ai (``pip install 'longcall[pydantic-ai]'``); importing
``longcall`` alone never imports it.
"""

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.pydantic_ai needs pydantic-ai; install it with: "
        "pip install 'longcall[pydantic-ai]'"
    ) from exc

from longcall.pydantic_ai._runner import PydanticAiRunner
from longcall.pydantic_ai._tool import long_running_tool

__all__ = ["PydanticAiRunner", "long_running_tool"]
