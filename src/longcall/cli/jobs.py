"""``longcall jobs``: look at jobs, follow them live, and finish them by hand."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from longcall.cli._support import (
    EXIT_CHECK_FAILED,
    EXIT_CONFLICT,
    database_option,
    duration,
    emit,
    json_arg,
    local_time,
    open_app,
    output_option,
    readable,
)
from longcall.shapes import event_json, job_json
from longcall.telemetry import completion_via

if TYPE_CHECKING:
    from longcall.core.jobs import Job


@click.group()
def jobs() -> None:
    """Look at jobs, follow them live, and finish them by hand."""


@jobs.command("list")
@database_option
@output_option
@click.option(
    "--state", type=click.Choice(["started", "succeeded", "failed", "expired", "cancelled"])
)
@click.option("--tool", "tool_name")
@click.option("--session", "session_id")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
def jobs_list(
    database: str,
    output: str | None,
    state: str | None,
    tool_name: str | None,
    session_id: str | None,
    limit: int,
) -> None:
    """List jobs, newest first."""
    from longcall.core.jobs import JobState

    with open_app(database) as app:
        found = app.list_jobs(
            state=JobState(state) if state else None,
            tool_name=tool_name,
            session_id=session_id,
            limit=limit,
        )

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("job", "tool", "state", "delivery", "session", "call", "updated")
        for job in found:
            t.add_row(
                job.job_id,
                job.tool_name,
                job.state.value,
                job.delivery.value,
                job.session_id or "",
                job.call_id or "",
                local_time(job.updated_at),
            )
        Console().print(t)

    emit([job_json(j) for j in found], output, table)


@jobs.command("show")
@database_option
@output_option
@click.argument("job_id")
def jobs_show(database: str, output: str | None, job_id: str) -> None:
    """A job with its event log."""
    with open_app(database) as app:
        job = app.get_job(job_id)
        events = app.job_events(job_id)
    data = {**job_json(job), "events": [event_json(e) for e in events]}

    def table() -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()
        for key, value in readable(job_json(job)).items():
            if value is not None:
                console.print(f"[bold]{key:>16}[/bold]  {escape(str(value))}", highlight=False)
        for event in events:
            line = f"#{event.seq} {local_time(event.created_at)} {event.kind} {event.data}"
            console.print(f"[bold]{'event':>16}[/bold]  {escape(line)}", highlight=False)

    emit(data, output, table)


def _finish(outcome: Any, output: str | None, strict: bool) -> None:
    data = {"changed": outcome.changed, "job": job_json(outcome.job)}
    if outcome.changed:
        note = ""
    elif outcome.late:
        note = " (unchanged: its deadline had passed; the result is recorded as late)"
    else:
        note = " (unchanged: it had finished already)"
    emit(data, output, lambda: click.echo(f"{outcome.job.job_id}: {outcome.job.state.value}{note}"))
    if strict and not outcome.changed:
        sys.exit(EXIT_CONFLICT)


strict_option = click.option(
    "--strict", is_flag=True, help="Exit 5 when the job had already finished."
)


@jobs.command("complete")
@database_option
@output_option
@strict_option
@click.argument("job_id")
@click.option("--result", help="The result as JSON.")
def jobs_complete(
    database: str, output: str | None, strict: bool, job_id: str, result: str | None
) -> None:
    """Complete a job; the first terminal result wins."""
    value = json_arg(result, "--result")
    with open_app(database) as app, completion_via("cli"):
        _finish(app.complete(job_id, value), output, strict)


@jobs.command("fail")
@database_option
@output_option
@strict_option
@click.argument("job_id")
@click.option("--error", required=True, help="What went wrong.")
def jobs_fail(database: str, output: str | None, strict: bool, job_id: str, error: str) -> None:
    """Fail a job."""
    with open_app(database) as app, completion_via("cli"):
        _finish(app.fail(job_id, error), output, strict)


@jobs.command("cancel")
@database_option
@output_option
@strict_option
@click.argument("job_id")
@click.option("--reason", help="Why, for the agent to pass on.")
def jobs_cancel(
    database: str, output: str | None, strict: bool, job_id: str, reason: str | None
) -> None:
    """Cancel a job; its tool's on_cancel hook runs in a worker."""
    with open_app(database) as app, completion_via("cli"):
        _finish(app.cancel(job_id, reason), output, strict)


@jobs.command("progress")
@database_option
@output_option
@click.argument("job_id")
@click.option("--data", required=True, help="The progress as JSON.")
@click.option("--notify-model", is_flag=True, help="Let the model hear of it (throttled).")
def jobs_progress(
    database: str, output: str | None, job_id: str, data: str, notify_model: bool
) -> None:
    """Record progress on a running job."""
    value = json_arg(data, "--data")
    with open_app(database) as app:
        job = app.progress(job_id, value, notify_model=notify_model)
    if job is None:
        click.echo(f"{job_id} has finished already; progress ignored", err=True)
        sys.exit(EXIT_CONFLICT)
    emit(job_json(job), output, lambda: click.echo(f"{job_id}: progress #{job.progress_seq}"))


@jobs.command("redeliver")
@database_option
@output_option
@click.argument("job_id")
@click.option(
    "--app",
    "app_name",
    help="Deliver into this ADK app's session from now on (the job went to the wrong app).",
)
def jobs_redeliver(database: str, output: str | None, job_id: str, app_name: str | None) -> None:
    """Send an orphaned or failed delivery again, once its cause is fixed; exits 5 for a job
    whose delivery is anything else."""
    with open_app(database) as app:
        job = app.redeliver(job_id, app_name=app_name)
    emit(
        {"changed": True, "job": job_json(job)},
        output,
        lambda: click.echo(f"{job_id}: ready for delivery to {job.app_name or 'any app'}"),
    )


@jobs.command("extend")
@database_option
@output_option
@click.argument("job_id")
@click.option(
    "--deadline",
    callback=duration,
    metavar="DURATION",
    required=True,
    help="The new deadline, counted from now: 45m, 2h, 1d (earlier or later than before).",
)
def jobs_extend(database: str, output: str | None, job_id: str, deadline: float) -> None:
    """Move a running job's deadline to --deadline from now; exits 5 if it has finished."""
    from longcall.core.jobs import describe_duration

    if deadline <= 0:
        raise click.BadParameter("must be more than 0 seconds", param_hint="'--deadline'")
    with open_app(database) as app:
        job = app.extend_deadline(job_id, deadline)
        if job is None:
            finished = app.get_job(job_id)
            click.echo(
                f"error: {job_id} has {finished.state.value} already; a deadline no longer applies",
                err=True,
            )
            sys.exit(EXIT_CONFLICT)
    emit(
        {"changed": True, "job": job_json(job)},
        output,
        lambda: click.echo(
            f"{job_id}: deadline {_when(job.deadline_at)} (in {describe_duration(deadline)})"
        ),
    )


def _when(timestamp: float | None, *, seconds_only: bool = False) -> str:
    import datetime as dt

    if timestamp is None:
        return "none"
    moment = dt.datetime.fromtimestamp(timestamp).astimezone()
    return moment.strftime("%H:%M:%S") if seconds_only else moment.isoformat(timespec="seconds")


def _unattached(job: Job) -> str:
    missing = "no session" if job.session_id is None else "no function call id"
    return (
        f"{job.job_id} has {missing}, so no agent will be given its result unless it is "
        "attached; the watch ends when the job finishes (exit 1 if still unattached)"
    )


@jobs.command("watch")
@database_option
@output_option
@click.argument("job_id", required=False)
@click.option(
    "--state", type=click.Choice(["started", "succeeded", "failed", "expired", "cancelled"])
)
@click.option("--tool", "tool_name")
@click.option("--session", "session_id")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option(
    "--interval",
    callback=duration,
    metavar="DURATION",
    default="1s",
    show_default=True,
    help="How often.",
)
@click.option(
    "--until",
    type=click.Choice(["delivered", "finished"]),
    default="delivered",
    show_default=True,
    help="With JOB_ID: stop once the job finished and the agent has its response (or its "
    "delivery was given up), or as soon as it finished.",
)
@click.option(
    "--timeout",
    callback=duration,
    metavar="DURATION",
    default=None,
    help="Stop after this long; with JOB_ID, exit 1 when the job was not done by then.",
)
def jobs_watch(
    database: str,
    output: str | None,
    job_id: str | None,
    state: str | None,
    tool_name: str | None,
    session_id: str | None,
    limit: int,
    interval: float,
    until: str,
    timeout: float | None,
) -> None:
    """Follow jobs live by polling the database (SQLite or PostgreSQL, no server needed).

    With JOB_ID: its log so far and each new entry, and each change of its state or
    delivery; exits 0 once it is done (see --until), 1 when its delivery failed or was
    orphaned, or when it finished with no session or call id to deliver to (said on
    stderr, since no agent hears of such a job). Without: each of the newest --limit jobs
    (matching the filters) whose row changed, until Ctrl-C or --timeout. Ctrl-C exits 0.
    JSON: one object per line.
    """
    import time

    from longcall.cli._watch import JobFollower, JobsFollower, Seen, done
    from longcall.core.jobs import Delivery, JobState

    if job_id and (state or tool_name or session_id):
        raise click.UsageError("--state, --tool and --session filter the jobs without a JOB_ID")
    as_json = output == "json" or (output is None and not sys.stdout.isatty())

    def show(seen: Seen) -> None:
        job, event = seen.job, seen.event
        if as_json:
            if event is not None:
                line = {"type": "event", **event_json(event)}
            else:
                line = {"type": "job", **job_json(job)}
            click.echo(json.dumps(line, default=str))
        elif event is not None:
            stamp = _when(event.created_at, seconds_only=True)
            data = "" if event.data is None else f" {json.dumps(event.data, default=str)}"
            click.echo(f"{stamp}  {job.job_id}  #{event.seq} {event.kind}{data}")
        else:
            stamp = _when(job.updated_at, seconds_only=True)
            tool = "" if job_id else f" ({job.tool_name})"
            click.echo(
                f"{stamp}  {job.job_id}{tool}  {job.state.value}, delivery {job.delivery.value}"
            )

    stop_at = None if timeout is None else time.monotonic() + timeout
    with open_app(database) as app:
        follower: JobFollower | JobsFollower
        if job_id:
            follower = JobFollower(app, job_id)
        else:
            follower = JobsFollower(
                app,
                limit=limit,
                state=JobState(state) if state else None,
                tool_name=tool_name,
                session_id=session_id,
            )
        unattached_said = False
        try:
            while True:
                seen = follower.look()
                for item in seen:
                    show(item)
                if job_id and seen and done(seen[-1].job, until=until):
                    delivery = seen[-1].job.delivery
                    failed = delivery in (Delivery.FAILED, Delivery.ORPHANED)
                    sys.exit(EXIT_CHECK_FAILED if failed and until == "delivered" else 0)
                if job_id and seen and until == "delivered" and not seen[-1].job.attached:
                    # Nothing reaches an agent until someone attaches the job: waiting for a
                    # delivery past its end would never stop.
                    if not unattached_said:
                        click.echo(_unattached(seen[-1].job), err=True)
                        unattached_said = True
                    if seen[-1].job.terminal:
                        sys.exit(EXIT_CHECK_FAILED)
                left = None if stop_at is None else stop_at - time.monotonic()
                if left is not None and left <= 0:
                    if job_id:
                        click.echo(f"{job_id} is not done after {timeout:g} s", err=True)
                        sys.exit(EXIT_CHECK_FAILED)
                    return
                time.sleep(interval if left is None else min(interval, left))
        except KeyboardInterrupt:
            return
