"""``longcall runs stream``: print a run's stream (``ctx.stream``) as it is written."""

from __future__ import annotations

import json
import sys

import click

from longcall.cli._support import (
    EXIT_CHECK_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    database_option,
    duration,
    open_app,
    output_option,
)
from longcall.errors import InvalidValue, RunNotFound


@click.command("stream")
@database_option
@output_option
@click.option("--after", type=click.IntRange(min=0), default=0, help="Start after this seq.")
@click.option(
    "--timeout",
    callback=duration,
    metavar="DURATION",
    default=None,
    help="Give up when no item comes for this long (exit 1).",
)
@click.argument("run_id")
@click.argument("key")
def runs_stream(
    database: str, output: str | None, after: int, timeout: float | None, run_id: str, key: str
) -> None:
    """Print the run's stream KEY from the start (or after --after), live, until the run
    closes it or finishes. Text values are printed as they are (tokens join up), others as
    JSON lines; with -o json (or when piped) one {"seq", "value", "attempt"} object a line.

    Exit 3 for an unknown run, 2 for a bad key, 1 for --timeout.
    """
    as_json = output == "json" or (output is None and not sys.stdout.isatty())
    with open_app(database) as app:
        at_line_start = True
        try:
            for item in app.read_stream(run_id, key, after=after, timeout=timeout):
                if as_json:
                    line = {"seq": item.seq, "value": item.value, "attempt": item.attempt}
                    click.echo(json.dumps(line, default=str))
                elif isinstance(item.value, str):
                    click.echo(item.value, nl=False)
                    at_line_start = item.value.endswith("\n")
                else:
                    prefix = "" if at_line_start else "\n"
                    click.echo(prefix + json.dumps(item.value, default=str))
                    at_line_start = True
                sys.stdout.flush()
        except RunNotFound as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_NOT_FOUND)
        except (InvalidValue, ValueError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except TimeoutError as exc:
            click.echo(f"\nerror: {exc}", err=True)
            sys.exit(EXIT_CHECK_FAILED)
        if not as_json and not at_line_start:
            click.echo()
