"""Canaries for the private parts of dependencies that longcall relies on.

Each test names the dependency, the private thing, and the longcall code that needs it, so
that an upgrade which moves it fails here, with that message, rather than somewhere deep in
a scenario. pyproject.toml bounds each such dependency above the versions tested; raise a
bound only with these tests passing on the new version.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.metadata
import inspect
from typing import Any

import pytest


def version(dist: str) -> str:
    return importlib.metadata.version(dist)


def test_psycopg_pool_internals_of_the_reusing_pool() -> None:
    """store/postgres.py's _ReusingPool reorders ``ConnectionPool._pool`` (a deque of idle
    connections, taken from the front) inside ``_get_ready_connection(timeout)``."""
    pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")
    from psycopg_pool import ConnectionPool

    where = f"psycopg-pool {version('psycopg-pool')}"
    getter = getattr(ConnectionPool, "_get_ready_connection", None)
    assert getter is not None, f"{where} has no ConnectionPool._get_ready_connection"
    assert list(inspect.signature(getter).parameters) == ["self", "timeout"], where
    pool: Any = ConnectionPool("dbname=canary", open=False)
    assert isinstance(pool._pool, collections.deque), f"{where}: _pool is not a deque"
    source = inspect.getsource(ConnectionPool._get_ready_connection)
    assert "self._pool.popleft()" in source, f"{where} no longer takes from the front"


def test_uvicorn_protocol_internals_of_the_request_deadlines() -> None:
    """server/limits.py's timed protocols hook uvicorn's parsing callbacks and read
    ``cycle``, ``pipeline`` (httptools) and ``conn`` (h11); server/runner.py overrides
    ``Server.shutdown(sockets)``."""
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    where = f"uvicorn {version('uvicorn')}"
    for name in ("data_received", "on_message_begin", "on_headers_complete"):
        assert callable(getattr(HttpToolsProtocol, name, None)), f"{where}: {name}"
    assert callable(getattr(HttpToolsProtocol, "on_message_complete", None)), where
    assert callable(getattr(H11Protocol, "handle_events", None)), f"{where}: handle_events"

    async def app(scope: Any, receive: Any, send: Any) -> None:  # never called
        raise AssertionError

    config = uvicorn.Config(app)
    config.load()
    loop = asyncio.new_event_loop()
    state: dict[str, Any] = {}
    try:
        tools = HttpToolsProtocol(config, ServerState(), state, _loop=loop)
        h11 = H11Protocol(config, ServerState(), state, _loop=loop)
    finally:
        loop.close()
    assert hasattr(tools, "pipeline") and hasattr(tools, "cycle"), where
    assert hasattr(h11, "cycle") and hasattr(h11.conn, "their_state"), where
    assert hasattr(h11.conn, "trailing_data") and hasattr(h11.conn, "our_state"), where
    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]


def test_google_adk_internals_of_the_integration() -> None:
    """adk/tool.py extends ``FunctionTool._ignore_params`` and finds an AgentTool's caller
    through ``ForwardingArtifactService.tool_context``; adk/plugin.py copies a reloaded
    session's ``_storage_update_marker``; adk/server_apps.py uses ``google.adk.cli``'s
    agent loader and session-service factory, as ``adk api_server`` does."""
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    from google.adk.sessions.session import Session
    from google.adk.tools._forwarding_artifact_service import ForwardingArtifactService
    from google.adk.tools.function_tool import FunctionTool

    where = f"google-adk {version('google-adk')}"

    def tool(x: int) -> int:
        """A tool."""
        return x

    assert isinstance(FunctionTool(tool)._ignore_params, list), f"{where}: _ignore_params"
    init = inspect.signature(ForwardingArtifactService.__init__).parameters
    assert "tool_context" in init, f"{where}: ForwardingArtifactService(tool_context)"
    assert "self.tool_context = tool_context" in inspect.getsource(ForwardingArtifactService)
    assert "_storage_update_marker" in Session.__private_attributes__, where

    from longcall.adk.server_apps import _adk_cli

    cli = _adk_cli()  # raises ConfigError naming the version it was written for
    assert callable(cli.AgentLoader) and callable(cli.create_session_service), where
