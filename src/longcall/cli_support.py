"""What the ``longcall`` commands share: exit codes, common options, opening the App, output.

Exit codes, one meaning each (shown by ``longcall --help``): 0 done; 1 a check failed (the
demo, ``doctor``, ``migrate --check``, ``jobs watch`` of a job never delivered); 2 bad usage
(click's own, a database URL that cannot work, a missing extra); 3 no such job, source or
token; 4 the database is unreachable or its schema is not this version's; 5 the request
conflicts with the job's state (a completion that changed nothing with ``--strict``,
extending a finished job).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import click

from longcall.errors import ConfigError, JobNotFound, SchemaError, StoreError

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_DATABASE = 4
EXIT_CONFLICT = 5
EXIT_CODES = f"""\b
Exit codes:
  0  done
  {EXIT_CHECK_FAILED}  a check failed (demo, doctor, migrate --check, jobs watch)
  {EXIT_USAGE}  bad usage: an option, a database URL that cannot work, a missing extra
  {EXIT_NOT_FOUND}  no such job, webhook source or token
  {EXIT_DATABASE}  the database is unreachable, or its schema is not this version's
  {EXIT_CONFLICT}  the job's state refuses the request (finished already, with --strict)
"""

database_option = click.option(
    "--database",
    envvar="LONGCALL_DATABASE_URL",
    default="sqlite:///longcall.db",
    show_default=True,
    help="Database URL (env LONGCALL_DATABASE_URL): sqlite:///file.db or postgresql://…",
)
output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default=None,
    help="json on stdout (the default when stdout is not a terminal), or a table.",
)


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """Option callback: ``90s``, ``45m``, ``1h30m``, ``2d`` or plain seconds, as seconds."""
    if value is None:
        return None
    from longcall.jobs import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def json_arg(value: str | None, what: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what} is not valid JSON: {exc}") from exc


@contextmanager
def open_app(database: str, *, migrate: bool = False) -> Iterator[Any]:
    """The App on ``database``; exits with the code for a bad URL, the database or a job."""
    from longcall.app import App

    try:
        app = App(database, migrate=migrate)
    except (ConfigError, ImportError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except SchemaError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    except StoreError as exc:
        from longcall.doctor import mask_url

        click.echo(f"error: cannot use the database {mask_url(database)!r}: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    try:
        yield app
    except JobNotFound as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except StoreError as exc:
        click.echo(f"error: database: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    finally:
        app.close()


def emit(data: Any, output: str | None, table: Callable[[], None]) -> None:
    """``data`` as JSON (``-o json``, or stdout is not a terminal), else ``table()``."""
    if output == "json" or (output is None and not sys.stdout.isatty()):
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        table()


def job_dict(job: Any) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    data["delivery"] = job.delivery.value
    return data
