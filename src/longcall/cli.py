"""The ``longcall`` command."""

from __future__ import annotations

import sys

import click


@click.group()
@click.version_option(package_name="longcall")
def main() -> None:
    """longcall: durable long-running tool calls for AI agents."""


@main.command()
@click.option("--database", envvar="LONGCALL_DATABASE_URL", default=None,
              help="Database URL (default: a throwaway SQLite file).")
def demo(database: str | None) -> None:
    """Play the worked example: a 19-minute report, a duplicate, a deadline."""
    from longcall.demo import run_demo

    sys.exit(run_demo(database))
