"""``longcall runs history``: a run's steps with the state after each (``app.run_history``);
``longcall runs fork``: a new run from one of them (``app.fork_run``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from longcall.cli._support import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    database_option,
    emit,
    json_arg,
    load_object,
    local_time,
    open_app,
    output_option,
)
from longcall.errors import InvalidValue, RunNotFound, WorkflowNotFound
from longcall.shapes import history_json, run_json

if TYPE_CHECKING:
    from longcall.app import App


def _app(app_spec: str) -> App:
    from longcall.app import App

    app = load_object(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    return app


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command("history")
@database_option
@output_option
@click.option(
    "--app",
    "app_spec",
    default=None,
    help="Your App (package.module:name): with it, each step shows the state after it.",
)
@click.argument("run_id")
def runs_history(database: str, output: str | None, app_spec: str | None, run_id: str) -> None:
    """The run's steps (task calls, sleeps, recvs, set_events) in order, each with its
    output and the state after it: the step numbers `longcall runs fork` takes.

    Exit 3 for an unknown run.
    """
    try:
        if app_spec is not None:
            app = _app(app_spec)
            try:
                entries = app.run_history(run_id)
            finally:
                app.close()
        else:
            with open_app(database) as app:
                entries = app.run_history(run_id)
    except RunNotFound as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except InvalidValue as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("step", "kind", "name", "ok", "output / error", "state after", "finished")
        for e in entries:
            t.add_row(
                str(e.step),
                e.kind,
                e.name,
                "yes" if e.ok else "no",
                _short(e.output if e.ok else e.error),
                "—" if e.state is None else _short(e.state),
                local_time(e.finished_at),
            )
        Console().print(t)

    emit({"runId": run_id, "steps": [history_json(e) for e in entries]}, output, table)


@click.command("fork")
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    required=True,
    help="Your App, as package.module:name (env LONGCALL_APP): its workflows and database.",
)
@output_option
@click.option(
    "--from-step",
    type=int,
    required=True,
    help="The first step to execute again; the ones before are reused.",
)
@click.option("--input", "input_text", help="A new input as JSON (default: the original's).")
@click.argument("run_id")
def runs_fork(
    app_spec: str, output: str | None, from_step: int, input_text: str | None, run_id: str
) -> None:
    """Queue a new run of RUN_ID's workflow that reuses its steps before --from-step and
    executes from it on with the code workers have now.

    Exit 3 for an unknown run or a workflow the App does not register, 2 for a step out of
    range or an input the workflow refuses (nothing is created then).
    """
    value = json_arg(input_text, "--input")
    app = _app(app_spec)
    try:
        forked = app.fork_run(run_id, from_step=from_step, input=value)
    except (RunNotFound, WorkflowNotFound) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except InvalidValue as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    finally:
        app.close()
    emit(
        run_json(forked),
        output,
        lambda: click.echo(
            f"{forked.run_id}: {forked.status.value}, forked from {run_id} at step {from_step}"
        ),
    )
