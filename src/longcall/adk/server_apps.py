"""The Runners ``adk api_server`` / ``adk web`` build, rebuilt here for ``longcall worker --adk``.

A resume must run through the same agent, plugins and session store as the ADK server that
took the user's turn, under the same app name. So this module builds each app of an agents
folder the way ADK's ``ApiServer.get_runner_async`` does: app name = agent folder name, the
agent (or ADK ``App``) loaded by ADK's own ``AgentLoader``, the app's plugins plus the
``--extra_plugins`` instantiated as ADK does, one session service made from
``--session_service_uri`` by ADK's own factory, shared by every app.

ADK's loader and service factory live in ``google.adk.cli``, which ADK does not promise to
keep stable; every import of it is in :func:`_adk_cli`, which names the version this was
written against when they move.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from google.adk.agents.base_agent import BaseAgent
from google.adk.apps import App as AdkApp
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService

from longcall.adk.runner import AdkAgentRunner
from longcall.adk.tool import LongcallTool
from longcall.errors import ConfigError

if TYPE_CHECKING:
    from longcall.app import App
    from longcall.worker import Worker

WRITTEN_FOR = "google-adk 2.13"


def _adk_cli() -> SimpleNamespace:
    """ADK's semi-internal CLI helpers, or a ConfigError saying they moved."""
    try:
        from google.adk.cli.service_registry import get_service_registry, load_services_module
        from google.adk.cli.utils.agent_loader import AgentLoader
        from google.adk.cli.utils.service_factory import create_session_service_from_options
    except ImportError as exc:  # pragma: no cover - depends on the installed google-adk
        raise ConfigError(
            f"longcall worker --adk was written against {WRITTEN_FOR}'s google.adk.cli "
            f"(AgentLoader, create_session_service_from_options), which this google-adk "
            f"no longer has: {exc}"
        ) from exc
    return SimpleNamespace(
        AgentLoader=AgentLoader,
        create_session_service=create_session_service_from_options,
        registry=get_service_registry,
        load_services_module=load_services_module,
    )


@dataclass(frozen=True)
class ServerApp:
    """One app of the agents folder: its ADK Runner and the longcall tools it uses."""

    name: str
    runner: Runner
    tools: tuple[LongcallTool, ...]


def check_session_service_uri(uri: str) -> None:
    """Refuse a session store another process cannot see, or a scheme ADK does not know."""
    scheme = urlsplit(uri).scheme.lower()
    if not scheme:
        raise ConfigError(f"--session-service-uri {uri!r} has no scheme (e.g. sqlite:///x.db)")
    in_memory = scheme == "memory" or (scheme == "sqlite" and not urlsplit(uri).path)
    if in_memory:
        raise ConfigError(
            f"--session-service-uri {uri!r} keeps sessions in the memory of one process: "
            "this worker could not see the ADK server's sessions, so its resumes would find "
            "no session and the calls would stay open forever. Give both processes the same "
            "persistent store, e.g. sqlite:///sessions.db or postgresql+asyncpg://…"
        )
    known = scheme in getattr(_adk_cli().registry(), "_session_factories", {})
    # Anything else ADK hands to SQLAlchemy (DatabaseSessionService), as a dialect[+driver].
    if not known and scheme.split("+")[0] not in _SQLALCHEMY_DIALECTS:
        raise ConfigError(
            f"--session-service-uri {uri!r}: ADK has no session service for {scheme!r}:// "
            "(sqlite:///file.db, postgresql+asyncpg://…, mysql+aiomysql://…, agentengine://…)"
        )


_SQLALCHEMY_DIALECTS = {"sqlite", "postgresql", "mysql", "mariadb", "oracle", "mssql", "spanner"}


def adk_workers(app: App, server_apps: list[ServerApp], **options: Any) -> list[Worker]:
    """The worker resuming ``server_apps``' calls: one Worker given every app's runner, so
    each app's jobs are claimed under that app's sessions and go to its own runner."""
    for server_app in server_apps:
        for tool in server_app.tools:
            # The dispatcher re-runs a submission whose process died, and calls on_cancel
            # hooks, by tool name: the agents' tools must be known to the worker's App.
            app.tools.setdefault(tool.name, tool.job_tool)
    return [app.worker(runners=[AdkAgentRunner(s.runner) for s in server_apps], **options)]


def build_server_apps(
    agents_dir: str | Path, session_service_uri: str, extra_plugins: list[str] | tuple[str, ...]
) -> list[ServerApp]:
    """Every app of ``agents_dir`` with a Runner built as ``adk api_server AGENTS_DIR
    --session_service_uri URI --extra_plugins …`` builds it. Raises ConfigError for a folder
    with no agents, a URI that cannot work across processes, or a plugin that does not load
    (ADK's server only logs that; here it would mean resumes without the plugin)."""
    adk = _adk_cli()
    path = Path(agents_dir)
    if not path.is_dir():
        raise ConfigError(f"--adk {str(agents_dir)!r} is not a folder of ADK agents")
    # The folder's services.py may register its own URI schemes, as in ADK's server.
    adk.load_services_module(str(path))
    check_session_service_uri(session_service_uri)
    loader = adk.AgentLoader(str(path))
    names = loader.list_agents()
    if not names:
        raise ConfigError(
            f"--adk {str(agents_dir)!r} holds no agent folders (each with an __init__.py or "
            "agent.py defining root_agent)"
        )
    base_dir = path.parent if getattr(loader, "_is_single_agent", False) else path
    try:
        sessions: BaseSessionService = adk.create_session_service(
            base_dir=base_dir, session_service_uri=session_service_uri
        )
    except Exception as exc:
        raise ConfigError(
            f"--session-service-uri {session_service_uri!r}: ADK could not open it: {exc}"
        ) from exc
    plugin_names = [n.strip() for spec in extra_plugins for n in spec.split(",") if n.strip()]
    apps = []
    for name in names:
        try:
            agent_or_app = loader.load_agent(name)
        except Exception as exc:
            raise ConfigError(
                f"ADK agent {name!r} in {str(agents_dir)!r} failed to load: {exc}"
            ) from exc
        plugins = [_plugin(spec) for spec in plugin_names]
        if isinstance(agent_or_app, AdkApp):
            agent_or_app.plugins = agent_or_app.plugins + plugins
            adk_app = agent_or_app
        else:
            adk_app = AdkApp(name=name, root_agent=agent_or_app, plugins=plugins)
        runner = Runner(app=adk_app, app_name=name, session_service=sessions)
        apps.append(ServerApp(name, runner, tuple(_longcall_tools(adk_app.root_agent))))
    return apps


def _plugin(qualified_name: str) -> BasePlugin:
    """A plugin class (instantiated with its name, as ADK does) or instance by dotted name."""
    module_name, _, attr = qualified_name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"--extra_plugins {qualified_name!r} does not load: {exc}") from exc
    if isinstance(obj, BasePlugin):
        return obj
    if isinstance(obj, type) and issubclass(obj, BasePlugin):
        return obj(name=qualified_name)
    raise ConfigError(f"--extra_plugins {qualified_name!r} is not an ADK BasePlugin")


def _longcall_tools(node: Any) -> list[LongcallTool]:
    """The longcall tools of an agent tree (the worker's dispatcher re-runs their bodies)."""
    found: list[LongcallTool] = []
    if isinstance(node, BaseAgent):
        found += [t for t in getattr(node, "tools", []) if isinstance(t, LongcallTool)]
        for sub in node.sub_agents:
            found += _longcall_tools(sub)
    return found
