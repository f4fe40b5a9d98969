"""The MCP server over stdio, with the App's worker loops beside it.

A stdio server is one client's own process; the worker loops in it answer deadlines and
run ``on_cancel`` hooks (any other longcall worker on the same store would do as well, and
several do no harm: each job is claimed once).
"""

from __future__ import annotations

import asyncio
import contextlib

from mcp.server.stdio import stdio_server

from longcall.app import App
from longcall.mcp.server import mcp_server


async def serve_stdio(app: App, *, worker: bool = True) -> None:
    """Serve ``app``'s long-running tools as MCP tasks on stdin/stdout until stdin closes."""
    server = mcp_server(app)
    loops = app.worker() if worker else None
    looping = asyncio.create_task(loops.run(handle_signals=False)) if loops else None
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        if loops is not None and looping is not None:
            loops.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await looping
