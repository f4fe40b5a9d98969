"""``python -m longcall.mcp --app package.module:app``: the App's tools as MCP tasks on stdio.

The same as ``longcall mcp --app …``, for hosts that launch a module rather than a command.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys

from longcall.app import App
from longcall.mcp.stdio import serve_stdio


def load_app(spec: str) -> App:
    """The App ``package.module:name`` names, imported from the current directory first."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"--app must look like package.module:name, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    app = getattr(importlib.import_module(module_name), attr, None)
    if not isinstance(app, App):
        raise SystemExit(f"--app {spec!r} does not name a longcall App")
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m longcall.mcp", description=__doc__)
    parser.add_argument("--app", required=True, help="package.module:name of the App")
    parser.add_argument(
        "--no-worker", action="store_true", help="do not run the worker loops in this process"
    )
    args = parser.parse_args(argv)
    app = load_app(args.app)
    asyncio.run(serve_stdio(app, worker=not args.no_worker))


if __name__ == "__main__":
    main()
