"""Running the service: uvicorn, the worker loops beside it, and a shutdown that drains.

An event stream never ends by itself, and uvicorn waits for open connections before it stops;
so the server tells the streams to close (``state.closing``) the moment shutdown begins.
Slow clients are cut off by the deadlines in :mod:`longcall.server.limits`, which replaces
uvicorn's HTTP protocol with a timed one: httptools (C parsing) by default, or h11 when asked.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn
from starlette.applications import Starlette

from longcall.agents import AgentRunner
from longcall.app import App
from longcall.server import mcp_mount
from longcall.server.app import Settings, create_app
from longcall.server.limits import BODY_TIMEOUT, HEADER_TIMEOUT, HTTP, QuietDisconnects, protocol

log = logging.getLogger("longcall.server")


class Server(uvicorn.Server):
    """uvicorn's server, closing the app's event streams as soon as it starts shutting down."""

    def __init__(self, web: Starlette, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.web = web

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.web.state.closing.set()
        # Requests waiting in the store's retries (the database is away) end now with 503,
        # instead of holding the drain, and the process, for up to a minute each.
        self.web.state.longcall.stop_retries()
        await super().shutdown(sockets)


def build(
    app: App,
    *,
    agent: AgentRunner | None = None,
    settings: Settings | None = None,
    host: str = "127.0.0.1",
    port: int = 8800,
    header_timeout: float = HEADER_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
    http: HTTP = "httptools",
    **uvicorn_options: Any,
) -> Server:
    """A server for ``app`` (not started): ``await server.serve()`` or ``server.run()``.

    A client has ``header_timeout`` seconds to send a request's head and ``body_timeout``
    more for its body, whichever uvicorn protocol ``http`` names (both are timed);
    ``uvicorn_options`` go to :class:`uvicorn.Config` as they are.
    """
    web = create_app(app, agent=agent, settings=settings)
    options: dict[str, Any] = {
        "log_level": "warning",
        "timeout_graceful_shutdown": 5,
        "timeout_keep_alive": 5,
        "http": protocol(http=http, header_timeout=header_timeout, body_timeout=body_timeout),
        "ws": "none",
        "backlog": 2048,
    }
    options.update(uvicorn_options)
    config = uvicorn.Config(QuietDisconnects(web), host=host, port=port, **options)
    return Server(web, config)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for :func:`serve`, bound before anything is announced,
    so that a port in use or an address that is not this host's fails with the reason."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve the address {host!r}: {exc.strerror}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(exc.strerror or str(exc)) from exc
    return sock


def worker_duties(app: App, agent: AgentRunner | None) -> list[str]:
    """What the worker loops beside the server do for ``app``; empty when there is nothing
    for them (no agent to resume, no workflow whose background runs to execute and no tool
    served as an MCP task at ``/mcp``), and then they do not run at all."""
    workflows = sorted(app.workflows.registry)
    # MCP tasks have no agent to resume, but their deadlines and cancel hooks need the loops.
    mcp_tasks = bool(app.tools) and mcp_mount.available()
    if agent is None and not workflows and not mcp_tasks:
        return []
    duties = ["deliveries to the agent"] if agent is not None else []
    duties += ["deadlines", "tool submissions and cancel hooks"]
    if workflows:
        duties += [f"background runs of {', '.join(workflows)}", "cron schedules"]
    return duties


async def serve(
    app: App,
    *,
    agent: AgentRunner | None = None,
    worker: bool = True,
    deliveries: int = 16,
    settings: Settings | None = None,
    host: str = "127.0.0.1",
    port: int = 8800,
    sockets: list[socket.socket] | None = None,
    header_timeout: float = HEADER_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
) -> None:
    """Serve ``app`` until SIGTERM/SIGINT, with the worker loops unless ``worker`` is False;
    they deliver to up to ``deliveries`` sessions at once."""
    server = build(
        app,
        agent=agent,
        settings=settings,
        host=host,
        port=port,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
    )
    options: dict[str, Any] = {"deliveries": deliveries} if agent is not None else {}
    loops = app.worker(agent, **options) if worker and worker_duties(app, agent) else None
    if loops is not None:
        # The API wakes this process's scheduler when a schedule changes.
        server.web.state.scheduler = loops.scheduler
    looping = asyncio.create_task(loops.run(handle_signals=False)) if loops else None
    if looping is not None:

        def loops_ended(task: asyncio.Task[None]) -> None:
            # A dead worker loop must not leave a server that looks healthy: stop serving,
            # and the error comes out of this function below.
            if not task.cancelled() and task.exception() is not None:
                log.error("the worker loops died; stopping the server")
                server.should_exit = True

        looping.add_done_callback(loops_ended)
    try:
        await server.serve(sockets=sockets)  # returns once a signal has drained the server
    finally:
        if loops is not None and looping is not None:
            loops.stop()
            await looping
