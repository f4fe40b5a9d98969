"""``longcall runs versions``: per workflow and version, the runs not finished, so an
operator sees when an old version has drained (``app.run_versions``)."""

from __future__ import annotations

from typing import Any

import click

from longcall.cli._support import database_option, emit, local_time, open_app, output_option
from longcall.errors import InvalidValue
from longcall.shapes import iso
from longcall.workflows import checked_version


def version_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--version``, refused (usage error) unless it is a version a workflow could have."""
    if value is None:
        return None
    try:
        return checked_version(value)
    except InvalidValue as exc:
        raise click.BadParameter(exc.problem) from None


@click.command("versions")
@database_option
@output_option
@click.option("--workflow", "workflow_id", help="Only this workflow's versions.")
def runs_versions(database: str, output: str | None, workflow_id: str | None) -> None:
    """Per workflow and version, its runs not finished; a version not listed has drained."""
    with open_app(database) as app:
        found = app.run_versions(workflow_id)
    data: list[dict[str, Any]] = [
        {
            "workflowId": v.workflow_id,
            "version": v.version,
            **{_camel(status): n for status, n in v.counts.items()},
            "active": v.active,
            "oldestCreatedAt": iso(v.oldest_created_at),
        }
        for v in found
    ]

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("workflow", "version", "queued", "running", "waiting", "sleeping", "oldest")
        for v in found:
            c = v.counts
            t.add_row(
                v.workflow_id,
                v.version,
                *(str(c[s]) for s in ("queued", "running", "waiting_input", "sleeping")),
                local_time(v.oldest_created_at),
            )
        Console().print(t)
        if not found:
            click.echo("no runs in progress: every version has drained")

    emit(data, output, table)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
