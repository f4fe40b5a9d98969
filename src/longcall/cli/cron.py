"""``longcall cron``: cron schedules from the shell: add, list, show, pause, unpause, trigger,
rm, and preview an expression.

Every command but ``add`` and ``preview`` works on the store alone (``--database``), like
``longcall runs``; the workers' schedulers fire what is stored. ``add`` loads your App
(``--app``) to check that the workflow exists and its input fits, and stores the schedule in
the App's database; with ``--no-check`` it stores it in ``--database`` unchecked. ``preview``
needs no database. A schedule is named by its id or its name.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import click

from longcall.cli._support import (
    EXIT_CONFLICT,
    EXIT_DATABASE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    database_option,
    emit,
    json_arg,
    old_name,
    open_app,
    output_option,
)
from longcall.core.cron import ConcurrencyPolicy, MisfirePolicy
from longcall.errors import (
    CronConflict,
    CronNotFound,
    CronValidationError,
    StoreError,
    WorkflowNotFound,
)
from longcall.shapes import cron_json, fire_json, zoned_times

if TYPE_CHECKING:
    from longcall.app import App
    from longcall.core.cron import Cron

NEXT_TIMES = 5
# The table of `cron list`; "active" counts runs queued, running or waiting, "runs" all started.
COLUMNS = [
    "name",
    "workflow",
    "expression",
    "zone",
    "policy",
    "paused",
    "next fire",
    "active",
    "runs",
]
RECENT_FIRES = 10
# The API's field names, as this command's arguments and options call them.
OPTION_NAMES = {
    "cronExpression": "EXPRESSION",
    "timezone": "--timezone",
    "name": "NAME",
    "workflowId": "WORKFLOW_ID",
    "concurrencyPolicy": "--concurrency",
    "misfirePolicy": "--misfire",
    "catchUpMax": "--catch-up-max",
}


@click.group()
def cron() -> None:
    """Cron schedules: start a workflow at each occurrence of a cron expression in a zone.

    \b
    Exit codes beyond the usual: 2 a bad expression or time zone (the field is named);
    3 no such schedule or workflow; 5 the name is taken, or a trigger skipped because a
    run of the schedule is active.
    """


def local(at: float | None, timezone: str) -> str:
    """A time for a table, in the schedule's zone."""
    if at is None:
        return "—"
    try:
        zone = ZoneInfo(timezone)
    except (ValueError, KeyError):  # a zone this host does not know: show UTC
        zone = ZoneInfo("UTC")
    return dt.datetime.fromtimestamp(at, zone).strftime("%Y-%m-%d %H:%M:%S %Z")


@contextmanager
def refusals() -> Iterator[None]:
    """Exit with the code of a schedule refusal, saying what it was."""
    try:
        yield
    except CronValidationError as exc:
        where = OPTION_NAMES.get(exc.field, exc.field)
        click.echo(f"error: {where}: {exc.problem}", err=True)
        sys.exit(EXIT_USAGE)
    except (CronNotFound, WorkflowNotFound) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except CronConflict as exc:
        click.echo(f"error: the name {exc.name!r} is taken by another schedule", err=True)
        sys.exit(EXIT_CONFLICT)


def find(app: App, ref: str) -> Cron:
    """The schedule with this id, or else this name."""
    try:
        return app.crons.get(ref)
    except CronNotFound:
        try:
            return app.crons.get_by_name(ref)
        except CronNotFound:
            raise CronNotFound(ref) from None


def _choice(kind: type[ConcurrencyPolicy] | type[MisfirePolicy]) -> click.Choice[str]:
    return click.Choice([m.value for m in kind])


@cron.command("add")
@click.argument("name")
@click.argument("workflow_id")
@click.argument("expression")
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    help="Your App, as package.module:name (env LONGCALL_APP): checks that WORKFLOW_ID is "
    "registered and the input fits, and stores the schedule in its database.",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Load no App: store the schedule in --database without checking the workflow.",
)
@database_option
@output_option
@click.option("-z", "--timezone", default="UTC", show_default=True, help="An IANA zone name.")
@click.option("--input", "input_text", help="The workflow's input as JSON.")
@click.option(
    "--concurrency",
    type=_choice(ConcurrencyPolicy),
    default="skip",
    show_default=True,
    help="While a run it started is active: start nothing, start another, or queue one.",
)
@click.option(
    "--misfire",
    type=_choice(MisfirePolicy),
    default="skip",
    show_default=True,
    help="Occurrences missed (paused, no scheduler): drop them, run once, or catch up.",
)
@click.option("--catch-up-max", type=click.IntRange(0, 1000), default=0, show_default=True)
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--user", "user_id", help="The user it belongs to (and the runs it starts).")
@click.option("--queue", help="Submit its runs to this named queue (declared by the App).")
def cron_add(
    name: str,
    workflow_id: str,
    expression: str,
    app_spec: str | None,
    no_check: bool,
    database: str,
    output: str | None,
    timezone: str,
    input_text: str | None,
    concurrency: str,
    misfire: str,
    catch_up_max: int,
    paused: bool,
    user_id: str | None,
    queue: str | None,
) -> None:
    """Start WORKFLOW_ID at each occurrence of EXPRESSION (5 fields, 6 with seconds first, or
    @daily, @hourly, …); the first is the first occurrence after now."""
    value = json_arg(input_text, "--input")
    options: dict[str, Any] = {
        "timezone": timezone,
        "concurrency_policy": concurrency,
        "misfire_policy": misfire,
        "catch_up_max": catch_up_max,
        "paused": paused,
        "user_id": user_id,
        "queue": queue,
    }
    if no_check:
        with open_app(database) as app, refusals():
            made = app.crons.create(
                name, workflow_id, expression, input=value, check_workflow=False, **options
            )
    elif app_spec:
        made = _add_checked(app_spec, name, workflow_id, expression, value, options)
    else:
        raise click.UsageError("give --app to check the workflow (or --no-check and --database)")
    emit(
        cron_json(made, 0),
        output,
        lambda: click.echo(
            f"{made.cron_id} ({made.name}): next at {local(made.next_fire_at, made.timezone)}"
            + (" (paused)" if made.paused else "")
        ),
    )


def _add_checked(
    app_spec: str,
    name: str,
    workflow_id: str,
    expression: str,
    value: Any,
    options: dict[str, Any],
) -> Cron:
    """The schedule created in the App's database, its workflow and input checked."""
    import pydantic

    from longcall.app import App
    from longcall.cli._support import load_object as _load
    from longcall.cron import parse

    app = _load(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    try:
        with refusals():
            parse(expression, options["timezone"])  # named before an unknown workflow
            workflow = app.workflows.resolve(workflow_id)
            try:
                encoded = workflow.encode_input(value)
            except pydantic.ValidationError as exc:
                click.echo(f"error: --input does not fit {workflow_id!r}: {exc}", err=True)
                sys.exit(EXIT_USAGE)
            try:
                return app.crons.create(
                    name, workflow_id, expression, input=encoded, check_workflow=True, **options
                )
            except StoreError as exc:
                click.echo(f"error: database: {exc}", err=True)
                sys.exit(EXIT_DATABASE)
    finally:
        app.close()


@cron.command("list")
@database_option
@output_option
@click.option("--workflow", "workflow_id", help="Only schedules of this workflow.")
@click.option("--paused/--active", default=None, help="Only paused, or only active, ones.")
@click.option("--user", "user_id", help="Only this user's schedules.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
def cron_list(
    database: str,
    output: str | None,
    workflow_id: str | None,
    paused: bool | None,
    user_id: str | None,
    limit: int,
) -> None:
    """List schedules by name, with their next fire time and active runs."""
    with open_app(database) as app:
        found = app.crons.list(workflow_id=workflow_id, paused=paused, user_id=user_id, limit=limit)
        active = {c.cron_id: app.crons.active_runs(c.cron_id) for c in found}
    rows = [cron_json(c, active[c.cron_id]) for c in found]

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table(*COLUMNS)
        for c in found:
            t.add_row(
                c.name,
                c.workflow_id,
                c.expression,
                c.timezone,
                c.concurrency_policy.value,
                "yes" if c.paused else "",
                local(c.next_fire_at, c.timezone),
                str(active[c.cron_id]),
                str(c.execution_count),
            )
        Console().print(t)

    emit(rows, output, table)


@cron.command("show")
@database_option
@output_option
@click.argument("ref", metavar="ID_OR_NAME")
def cron_show(database: str, output: str | None, ref: str) -> None:
    """A schedule with its next fire times, active runs and latest occurrences."""
    with open_app(database) as app, refusals():
        found = find(app, ref)
        active = app.crons.active_runs(found.cron_id)
        fires = app.crons.fires(found.cron_id, limit=RECENT_FIRES)
        try:
            upcoming = app.crons.preview(found.expression, found.timezone, count=NEXT_TIMES)
        except CronValidationError:  # a zone this host does not know
            upcoming = []
    data = {
        **cron_json(found, active),
        "nextFireTimes": zoned_times(upcoming, found.timezone),
        "recentFires": [fire_json(f) for f in fires],
    }

    def table() -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()

        def line(key: str, value: Any) -> None:
            console.print(f"[bold]{key:>14}[/bold]  {escape(str(value))}", highlight=False)

        for key in ("cronId", "name", "workflowId", "cronExpression", "timezone", "userId"):
            if data[key] is not None:
                line(key, data[key])
        line("input", data["input"])
        policy = f"{found.concurrency_policy.value}; misfire {found.misfire_policy.value}"
        if found.misfire_policy is MisfirePolicy.CATCH_UP:
            policy += f" (at most {found.catch_up_max})"
        line("policy", policy)
        line("paused", "yes" if found.paused else "no")
        line("runs", f"{found.execution_count} started, {active} active")
        for at in upcoming:
            line("next", local(at, found.timezone) + f"  ({local(at, 'UTC')})")
        for fire in fires:
            run = f" → {fire.run_id}" if fire.run_id else ""
            line("fired", f"{local(fire.fire_at, found.timezone)} {fire.outcome.value}{run}")

    emit(data, output, table)


def _set_paused(database: str, output: str | None, ref: str, paused: bool) -> None:
    with open_app(database) as app, refusals():
        changed = app.crons.update(find(app, ref).cron_id, paused=paused)
        active = app.crons.active_runs(changed.cron_id)
    state = (
        "paused" if paused else f"active; next at {local(changed.next_fire_at, changed.timezone)}"
    )
    emit(cron_json(changed, active), output, lambda: click.echo(f"{changed.name}: {state}"))


@cron.command("pause")
@database_option
@output_option
@click.argument("ref", metavar="ID_OR_NAME")
def cron_pause(database: str, output: str | None, ref: str) -> None:
    """Stop firing (runs already started go on); pausing again changes nothing."""
    _set_paused(database, output, ref, True)


@cron.command("unpause")
@database_option
@output_option
@click.argument("ref", metavar="ID_OR_NAME")
def cron_unpause(database: str, output: str | None, ref: str) -> None:
    """Fire again; occurrences missed while paused go to the misfire policy."""
    _set_paused(database, output, ref, False)


old_name(cron, "resume", cron_unpause)


@cron.command("trigger")
@database_option
@output_option
@click.option("--force", is_flag=True, help="Start a run even while a skip schedule has one.")
@click.argument("ref", metavar="ID_OR_NAME")
def cron_trigger(database: str, output: str | None, force: bool, ref: str) -> None:
    """Start a run now under the schedule's concurrency policy; exits 5 when a skip schedule
    has a run active (nothing started)."""
    with open_app(database) as app, refusals():
        found = find(app, ref)
        fire = app.crons.trigger(found.cron_id, force=force)
    said = f"run {fire.run_id} queued" if fire.run_id else "skipped: a run of it is active"
    emit(fire_json(fire), output, lambda: click.echo(f"{found.name}: {said}"))
    if not fire.outcome.started:
        sys.exit(EXIT_CONFLICT)


@cron.command("rm")
@database_option
@output_option
@click.argument("ref", metavar="ID_OR_NAME")
def cron_rm(database: str, output: str | None, ref: str) -> None:
    """Delete a schedule; the runs it started stay and go on."""
    with open_app(database) as app, refusals():
        found = find(app, ref)
        if not app.crons.delete(found.cron_id):
            raise CronNotFound(ref)  # deleted by someone else in between
    emit(
        {"deleted": found.cron_id},
        output,
        lambda: click.echo(f"deleted {found.cron_id} ({found.name})"),
    )


def _after(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time: {exc}", ctx, param) from None


@cron.command("preview")
@output_option
@click.argument("expression")
@click.option("-z", "--timezone", default="UTC", show_default=True, help="An IANA zone name.")
@click.option("-n", "--count", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option(
    "--after",
    callback=_after,
    metavar="ISO8601",
    help="Start from this time instead of now (without an offset: in --timezone).",
)
def cron_preview(
    output: str | None, expression: str, timezone: str, count: int, after: dt.datetime | None
) -> None:
    """The next fire times of EXPRESSION in --timezone (no database needed)."""
    import time

    from longcall.cron import preview

    with refusals():
        if after is not None and after.tzinfo is None:
            from longcall.cron import parse

            after = after.replace(tzinfo=parse(expression, timezone).zone)
        start = time.time() if after is None else after.timestamp()
        times = preview(expression, timezone, count=count, after=start)
    found = zoned_times(times, timezone)

    def table() -> None:
        for at in found:
            click.echo(f"{at['local']}  ({at['utc']})")

    emit(found, output, table)
