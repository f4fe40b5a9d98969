"""``longcall mcp``: the App's long-running tools as durable MCP tasks on stdin/stdout."""

from __future__ import annotations

import asyncio

import click

from longcall.cli._support import load_object


@click.command("mcp")
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    required=True,
    help="Your App, as package.module:name (env LONGCALL_APP); its tools are served.",
)
@click.option(
    "--no-worker",
    is_flag=True,
    help="Leave deadlines and cancel hooks to a worker elsewhere (longcall serve/worker).",
)
def mcp(app_spec: str, no_worker: bool) -> None:
    """Serve the App's long-running tools over MCP on stdio, each call a task (needs the
    mcp extra: pip install 'longcall[mcp]'). Point an MCP host's stdio server entry here;
    over HTTP, `longcall serve --app` serves the same at /mcp."""
    try:
        from longcall.mcp.stdio import serve_stdio
    except ImportError as exc:
        raise click.UsageError(str(exc)) from exc
    from longcall.app import App

    app = load_object(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is not a longcall.App", param_hint="--app")
    asyncio.run(serve_stdio(app, worker=not no_worker))
