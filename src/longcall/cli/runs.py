"""``longcall runs``: submit workflow runs, look at them, follow them, answer and cancel them.

Every command but ``submit`` works on the store alone (``--database``), like ``longcall
jobs``: workers execute the runs. ``submit`` loads your App (``--app``) for its workflow
registry, checks the input against the workflow's input type and queues the run in the App's
database.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from longcall.cli._support import (
    EXIT_CHECK_FAILED,
    EXIT_CONFLICT,
    EXIT_DATABASE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    database_option,
    duration,
    emit,
    json_arg,
    local_time,
    old_name,
    open_app,
    output_option,
)
from longcall.cli.run_forks import runs_fork, runs_history
from longcall.cli.run_messages import runs_send, runs_value
from longcall.cli.run_streams import runs_stream
from longcall.cli.run_versions import runs_versions, version_option
from longcall.core.runs import RunStatus
from longcall.errors import (
    DuplicateRun,
    InvalidAnswer,
    QueueNotFound,
    RunNotFound,
    RunStateError,
    StoreError,
    WorkflowNotFound,
)
from longcall.shapes import event_json, interrupt_json, run_json, step_json
from longcall.workflows import answer_problems

if TYPE_CHECKING:
    from longcall.app import App
    from longcall.core.runs import Run

STATUSES = [s.value for s in RunStatus]


@click.group()
def runs() -> None:
    """Submit workflow runs, look at them, follow them, answer and cancel them.

    \b
    Exit codes beyond the usual: 3 no such run or workflow; 5 the run's status refuses the
    request (resuming a run not waiting, cancelling a finished one with --strict); `watch`
    exits 1 when the run failed or was cancelled, or did not stop in --timeout.
    """


@contextmanager
def refusals() -> Iterator[None]:
    """Exit with the code of a run refusal, saying what it was."""
    try:
        yield
    except (RunNotFound, WorkflowNotFound) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except RunStateError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_CONFLICT)
    except InvalidAnswer as exc:
        _wrong_answers(exc.errors)


def _wrong_answers(problems: list[dict[str, str]]) -> None:
    listed = "; ".join(
        f"{p['key'] + ('.' + p['path'] if p['path'] else '') or 'values'}: {p['message']}"
        for p in problems
    )
    click.echo(f"error: {listed} (nothing was stored; the run still waits)", err=True)
    sys.exit(EXIT_USAGE)


@runs.command("submit")
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    required=True,
    help="Your App, as package.module:name (env LONGCALL_APP): its workflows and database.",
)
@output_option
@click.argument("workflow_id")
@click.option("--input", "input_text", help="The input as JSON (checked against its type).")
@click.option("--idempotency-key", help="Submit once: the same key returns the same run.")
@click.option("--max-retries", type=click.IntRange(0, 100), default=0, show_default=True)
@click.option(
    "--timeout",
    callback=duration,
    metavar="DURATION",
    default=None,
    help="How long each attempt may take: 90s, 45m, 2h.",
)
@click.option("--user", "user_id", help="The user the run belongs to (what their token sees).")
@click.option("--queue", help="The named queue to submit to (declared by the App).")
@click.option("--priority", type=int, help="Within the queue, lower runs first.")
@click.option("--dedupe-id", help="Refused (exit 5) while the queue has an active run with it.")
def runs_submit(
    app_spec: str,
    output: str | None,
    workflow_id: str,
    input_text: str | None,
    idempotency_key: str | None,
    max_retries: int,
    timeout: float | None,
    user_id: str | None,
    queue: str | None,
    priority: int | None,
    dedupe_id: str | None,
) -> None:
    """Queue a run of WORKFLOW_ID for a worker; exits 3 when the App has no such workflow
    or queue, 5 when the queue has an active run with --dedupe-id."""
    import pydantic

    from longcall.app import App
    from longcall.cli._support import load_object as _load

    value = json_arg(input_text, "--input")
    app = _load(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    try:
        with refusals():
            workflow = app.workflows.resolve(workflow_id)
        try:
            encoded = workflow.encode_input(value)
        except pydantic.ValidationError as exc:
            click.echo(f"error: --input does not fit {workflow_id!r}: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        try:
            run = app.submit_run(
                workflow,
                encoded,
                idempotency_key=idempotency_key,
                max_retries=max_retries,
                timeout=timeout,
                user_id=user_id,
                queue=queue,
                priority=priority,
                dedupe_id=dedupe_id,
            )
        except QueueNotFound as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_NOT_FOUND)
        except DuplicateRun as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_CONFLICT)
        except ValueError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except StoreError as exc:
            click.echo(f"error: database: {exc}", err=True)
            sys.exit(EXIT_DATABASE)
    finally:
        app.close()
    emit(
        {"created": run.created, "run": run_json(run)},
        output,
        lambda: click.echo(
            f"{run.run_id}: {run.status.value}" + ("" if run.created else " (submitted before)")
        ),
    )


@runs.command("list")
@database_option
@output_option
@click.option("--status", type=click.Choice(STATUSES))
@click.option("--workflow", "workflow_id")
@click.option("--user", "user_id")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option(
    "--version",
    callback=version_option,
    help="Only runs started by this version of their workflow.",
)
def runs_list(
    database: str,
    output: str | None,
    status: str | None,
    workflow_id: str | None,
    user_id: str | None,
    limit: int,
    version: str | None,
) -> None:
    """List runs, newest first."""
    with open_app(database) as app:
        found = app.list_runs(
            status=RunStatus(status) if status else None,
            workflow_id=workflow_id,
            user_id=user_id,
            limit=limit,
            version=version,
        )

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("run", "workflow", "status", "retries", "user", "created")
        for run in found:
            t.add_row(
                run.run_id,
                run.workflow_id,
                run.status.value
                + (" (cancelling)" if run.cancel_requested else "")
                + (f" until {local_time(run.wake_at)}" if run.wake_at is not None else ""),
                f"{run.attempts}/{run.max_retries}",
                run.user_id or "",
                local_time(run.created_at),
            )
        Console().print(t)

    emit([run_json(r) for r in found], output, table)


@runs.command("show")
@database_option
@output_option
@click.argument("run_id")
def runs_show(database: str, output: str | None, run_id: str) -> None:
    """A run with the questions it waits on, its task checkpoints and its event log."""
    with open_app(database) as app, refusals():
        details = app.get_run(run_id)
    run = details.run
    data = {
        **run_json(run),
        "pendingInterrupts": [interrupt_json(i) for i in details.pending],
        "steps": [step_json(s) for s in details.steps],
        "events": [event_json(e) for e in details.events],
        "children": [run_json(c) for c in details.children],
    }

    def table() -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()

        def line(key: str, value: Any) -> None:
            console.print(f"[bold]{key:>14}[/bold]  {escape(str(value))}", highlight=False)

        for key in (
            "runId",
            "workflowId",
            "status",
            "wakeAt",
            "parentRunId",
            "userId",
            "input",
            "result",
            "error",
        ):
            value = data[key]
            if value is not None:
                line(key, value if isinstance(value, str) else json.dumps(value, default=str))
        line("retries", f"{run.attempts} of {run.max_retries}")
        for error in run.errors:
            line("error", json.dumps(error, default=str))
        for asked in details.pending:
            line(asked.key, f"{asked.prompt}  schema {json.dumps(asked.schema)}")
            for problem in asked.error or []:
                line("", f"last answer refused: {problem}")
        for step in details.steps:
            outcome = json.dumps(step.result, default=str) if step.ok else "failed"
            line("step", f"#{step.position} {step.name} → {outcome}")
        for event in details.events:
            line("event", f"#{event.seq} {event.kind} {json.dumps(event.data, default=str)}")
        for child in details.children:
            line("child", f"{child.run_id} {child.workflow_id} {child.status.value}")

    emit(data, output, table)


@runs.command("watch")
@database_option
@output_option
@click.argument("run_id")
@click.option(
    "--interval",
    callback=duration,
    metavar="DURATION",
    default="500ms",
    show_default=True,
    help="How often to look.",
)
@click.option(
    "--timeout",
    callback=duration,
    metavar="DURATION",
    default=None,
    help="Give up after this long (exit 1).",
)
def runs_watch(
    database: str, output: str | None, run_id: str, interval: float, timeout: float | None
) -> None:
    """Follow a run's event log and status by polling the database until it stops: it
    completes or waits for input (exit 0), or fails or is cancelled (exit 1). Ctrl-C exits 0.
    JSON: one object per line."""
    import time

    from longcall.core.runs import RunStatus

    as_json = output == "json" or (output is None and not sys.stdout.isatty())
    stop_at = None if timeout is None else time.monotonic() + timeout
    after, seen = 0, None
    with open_app(database) as app, refusals():
        try:
            while True:
                for event in app.run_event_log(run_id, after=after):
                    after = event.seq
                    if as_json:
                        line = {"type": "event", **event_json(event)}
                        click.echo(json.dumps(line, default=str))
                    else:
                        data = "" if event.data is None else f" {json.dumps(event.data)}"
                        click.echo(f"{_when(event.created_at)}  #{event.seq} {event.kind}{data}")
                run = app.get_run(run_id).run
                if (run.status, run.updated_at) != seen:
                    seen = (run.status, run.updated_at)
                    if as_json:
                        click.echo(json.dumps({"type": "run", **run_json(run)}, default=str))
                    else:
                        click.echo(f"{_when(run.updated_at)}  {run_id}  {_status(run)}")
                if run.status.terminal or run.status is RunStatus.WAITING_INPUT:
                    # Events that committed after the look above, before the run stopped.
                    if app.run_event_log(run_id, after=after):
                        continue
                    ok = run.status in (RunStatus.COMPLETED, RunStatus.WAITING_INPUT)
                    sys.exit(0 if ok else EXIT_CHECK_FAILED)
                left = None if stop_at is None else stop_at - time.monotonic()
                if left is not None and left <= 0:
                    click.echo(
                        f"{run_id} is still {run.status.value} after {timeout:g} s", err=True
                    )
                    sys.exit(EXIT_CHECK_FAILED)
                time.sleep(interval if left is None else min(interval, left))
        except KeyboardInterrupt:
            return


def _status(run: Run) -> str:
    text = run.status.value
    if run.status.value == "failed" and run.error:
        text += f": {run.error.get('type')}: {run.error.get('message')}"
    elif run.status.value == "completed":
        text += f": {json.dumps(run.result, default=str)}"
    elif run.cancel_requested and not run.status.terminal:
        text += " (cancelling)"
    return text


def _when(timestamp: float | None) -> str:
    import datetime as dt

    if timestamp is None:
        return "—"
    return dt.datetime.fromtimestamp(timestamp).astimezone().strftime("%H:%M:%S")


@runs.command("cancel")
@database_option
@output_option
@click.option("--strict", is_flag=True, help="Exit 5 when the run had already finished.")
@click.argument("run_id")
def runs_cancel(database: str, output: str | None, strict: bool, run_id: str) -> None:
    """Cancel a run: at once if queued or waiting, at its next task call if running."""
    with open_app(database) as app, refusals():
        cancelled = app.request_run_cancel(run_id)
        run = cancelled or app.get_run(run_id).run
    emit(
        {"changed": cancelled is not None, "run": run_json(run)},
        output,
        lambda: click.echo(
            f"{run_id}: {_status(run)}"
            + ("" if cancelled else " (unchanged: it had finished already)")
        ),
    )
    if strict and cancelled is None:
        sys.exit(EXIT_CONFLICT)


def _values(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in given:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=JSON", ctx, param)
        try:
            values[key] = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = " (quote a string as JSON: '\"yes\"')" if text and text[0] not in "[{" else ""
            raise click.BadParameter(f"{key}: not valid JSON: {exc}{hint}", ctx, param) from exc
    return values


@runs.command("answer")
@database_option
@output_option
@click.argument("run_id")
@click.option(
    "--value",
    "values",
    multiple=True,
    required=True,
    callback=_values,
    metavar="KEY=JSON",
    help="An answer, as interrupt-1='{\"approved\": true}'; repeat for more.",
)
def runs_answer(database: str, output: str | None, run_id: str, values: dict[str, Any]) -> None:
    """Answer a waiting run's questions and queue it for a worker to continue.

    Each answer is checked against its question's JSON schema when the server extra is
    installed (exit 2 with every problem, nothing stored); the run checks it again.
    """
    with open_app(database) as app, refusals():
        run = app.get_run(run_id).run
        if run.status.value == "waiting_input":
            problems = _schema_problems(app, run_id, values)
            if problems:
                _wrong_answers(problems)
        queued = app.submit_answers(run_id, values)
    emit(
        run_json(queued),
        output,
        lambda: click.echo(f"{run_id}: {queued.status.value}; a worker continues it"),
    )


old_name(runs, "resume", runs_answer)


def _schema_problems(app: App, run_id: str, values: dict[str, Any]) -> list[dict[str, str]]:
    interrupts = {i.key: i for i in app.get_run(run_id).interrupts}
    try:
        return answer_problems(interrupts, values)
    except ImportError:  # no jsonschema (server extra): the run checks its answers itself
        return []


runs.add_command(runs_send)
runs.add_command(runs_value)
runs.add_command(runs_stream)
runs.add_command(runs_history)
runs.add_command(runs_fork)
runs.add_command(runs_versions)
