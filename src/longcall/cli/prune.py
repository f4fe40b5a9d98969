"""``longcall prune``: remove finished work older than a retention period, now; and the
``--keep`` option the worker takes for the periods it prunes by every minute."""

from __future__ import annotations

import click

from longcall.cli._support import database_option, open_app
from longcall.core.retention import FOREVER, MIN_WEBHOOK_WINDOW, Retention, parse_period

KINDS = ("jobs", "runs", "webhooks")


def retention_of(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Retention:
    """Option callback for ``--keep``: ``30d`` (every kind), ``forever``, or ``jobs=90d``,
    ``runs=7d``, ``webhooks=30d`` for one kind; repeated to set several."""
    periods: dict[str, str | float | None] = {}
    for value in values:
        kind, equals, period = value.partition("=")
        if not equals:
            periods = dict.fromkeys(KINDS, value)
            continue
        if kind not in KINDS:
            raise click.BadParameter(
                f"{kind!r} is not a kind of record: use {', '.join(KINDS)}", ctx, param
            )
        periods[kind] = period
    try:
        return Retention.of(**periods)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


keep_option = click.option(
    "--keep",
    multiple=True,
    callback=retention_of,
    metavar="PERIOD|KIND=PERIOD",
    help="How long finished work is kept before the worker removes it: 30d (the default) for "
    f"every kind, '{FOREVER}', or jobs=90d, runs=7d, webhooks=30d (the webhook inbox: at "
    f"least {MIN_WEBHOOK_WINDOW / 86400:.0f}d). Repeat for several.",
)


@click.command()
@database_option
@click.option(
    "--older-than",
    required=True,
    metavar="PERIOD",
    help="Remove finished jobs and runs older than this (30d, 12h ...). The webhook inbox and "
    f"early results go past the same age, but never under {MIN_WEBHOOK_WINDOW / 86400:.0f}d.",
)
@click.option(
    "--only",
    type=click.Choice(KINDS),
    multiple=True,
    help="Only these kinds of record (repeat for several; default: all).",
)
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
def prune(database: str, older_than: str, only: tuple[str, ...], dry_run: bool) -> None:
    """Remove finished work older than --older-than, in small batches, now (the worker does
    the same every minute, by its --keep periods). A job still running, one whose result
    waits to be delivered, and a run not finished are never removed."""
    try:
        age = parse_period(older_than, "--older-than")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    if age is None:
        click.echo("nothing to do: 'forever' keeps everything")
        return
    wanted = set(only or KINDS)
    retention = Retention(
        jobs=age if "jobs" in wanted else None,
        runs=age if "runs" in wanted else None,
        webhooks=max(age, MIN_WEBHOOK_WINDOW) if "webhooks" in wanted else None,
    )
    with open_app(database) as app:
        counts = app.prune(retention, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for kind, count in counts.items():
        click.echo(f"{verb} {count} {kind.replace('_', ' ')}")
