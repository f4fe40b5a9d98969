"""What the ``longcall`` commands share: exit codes, common options, opening the App, output.

Exit codes, one meaning each (shown by ``longcall --help``): 0 done; 1 a check failed (the
demo, ``doctor``, ``migrate --check``, ``jobs watch`` of a job never delivered); 2 bad usage
(click's own, a database URL that cannot work, a missing extra); 3 no such job, source or
token; 4 the database is unreachable or its schema is not this version's; 5 the request
conflicts with the job's state (a completion that changed nothing with ``--strict``,
extending a finished job).
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from longcall.errors import (
    AttachConflict,
    ConfigError,
    CronConflict,
    CronNotFound,
    InvalidValue,
    JobNotFound,
    LongcallError,
    NotRedeliverable,
    RunNotFound,
    RunStateError,
    SchemaError,
    StoreError,
    WorkflowNotFound,
)

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_DATABASE = 4
EXIT_CONFLICT = 5
EXIT_CODES = f"""\b
Exit codes:
  0  done
  {EXIT_CHECK_FAILED}  a check failed (demo, doctor, migrate --check, jobs watch), or a bug
  {EXIT_USAGE}  bad usage: an option, a database URL that cannot work, a missing extra
  {EXIT_NOT_FOUND}  no such job, run, workflow, schedule, webhook source or token
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


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """Option callback: ``90s``, ``45m``, ``1h30m``, ``2d`` or plain seconds, as seconds."""
    if value is None:
        return None
    from longcall.core.jobs import parse_duration

    try:
        return parse_duration(float(value) if _NUMBER.fullmatch(value.strip()) else value)
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
    """The App on ``database``; exits with the code for a bad URL, the database, a job or
    run not found, a run whose state refuses the request, or a value refused."""
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
        from longcall.cli._doctor import mask_url

        click.echo(f"error: cannot use the database {mask_url(database)!r}: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    try:
        yield app
    except (JobNotFound, RunNotFound) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except RunStateError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_CONFLICT)
    except InvalidValue as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
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


def local_time(timestamp: float | None) -> str:
    """An epoch time for a table: this machine's local time to the second, with its zone."""
    if timestamp is None:
        return "—"
    return dt.datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def readable(data: dict[str, Any]) -> dict[str, Any]:
    """A JSON shape (:mod:`longcall.shapes`) for a table: its times (``…At``) in local time."""
    return {
        key: local_time(dt.datetime.fromisoformat(value).timestamp())
        if key.endswith("At") and isinstance(value, str)
        else value
        for key, value in data.items()
    }


class LongcallGroup(click.Group):
    """The ``longcall`` group: an error a command did not handle becomes one line on stderr
    and the documented exit code, never a traceback (``-vv`` shows the traceback of a bug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            code, message = _exit_for(exc)
            if code is None:
                if logging.getLogger().isEnabledFor(logging.DEBUG):
                    raise
                message += " (a bug in longcall: run with -vv for the traceback and report it)"
                code = EXIT_CHECK_FAILED
            click.echo(f"error: {message}", err=True)
            ctx.exit(code)


def _exit_for(exc: Exception) -> tuple[int | None, str]:
    """The exit code and the line for an error no command handled; None for a bug."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, JobNotFound | RunNotFound | WorkflowNotFound | CronNotFound):
        return EXIT_NOT_FOUND, message
    if isinstance(exc, StoreError):
        return EXIT_DATABASE, message
    if isinstance(exc, AttachConflict | NotRedeliverable | RunStateError | CronConflict):
        return EXIT_CONFLICT, message
    # A URL that cannot work, a missing extra, or a request longcall refused as it stands.
    if isinstance(exc, LongcallError | ImportError):
        return EXIT_USAGE, message
    return None, f"{type(exc).__name__}: {message}"


def old_name(group: click.Group, old: str, command: click.Command) -> None:
    """Keep ``old`` in ``group`` as a hidden, deprecated name of ``command`` for one release."""
    group.add_command(
        click.Command(
            old,
            callback=command.callback,
            params=command.params,
            help=f"The old name of `longcall {group.name} {command.name}`.",
            hidden=True,
            deprecated=f"use `longcall {group.name} {command.name}`",
        )
    )


def load_object(spec: str, what: str) -> Any:
    """The object ``package.module:name`` names, imported from the current directory first
    (as uvicorn and ``adk`` do), so ``--app myproject.agent:app`` works from the project's
    folder without PYTHONPATH. A module whose import fails is a bad parameter, except for
    longcall's own errors (an unreachable database in ``App(...)``), which keep their code."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{what} must look like package.module:name, not {spec!r}")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except LongcallError:
        raise
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint=what) from exc
    except Exception as exc:
        raise click.BadParameter(
            f"importing {module_name!r} raised {type(exc).__name__}: {exc}"
            f" (python -c 'import {module_name}' shows the traceback)",
            param_hint=what,
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise click.BadParameter(f"{module_name!r} has no {attr!r}", param_hint=what) from None
