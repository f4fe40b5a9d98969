"""``longcall runs send``: a message to a run's ``ctx.recv`` (``app.send``); ``longcall runs
value``: a value the run published with ``ctx.set_event`` (``app.get_event``)."""

from __future__ import annotations

import json
import sys

import click

from longcall.cli._support import (
    EXIT_NOT_FOUND,
    database_option,
    duration,
    emit,
    json_arg,
    open_app,
    output_option,
)


@click.command("send")
@database_option
@output_option
@click.option(
    "--message", "message_text", default="null", help="The message, as JSON (default null)."
)
@click.option("--idempotency-key", default=None, help="Send once: a repeat stores nothing.")
@click.argument("run_id")
@click.argument("topic")
def runs_send(
    database: str,
    output: str | None,
    message_text: str,
    idempotency_key: str | None,
    run_id: str,
    topic: str,
) -> None:
    """Send a message to the run's ctx.recv(TOPIC); it is kept until the run receives it.

    Exit 3 for an unknown run, 5 for a finished one, 2 for a bad topic, key or message.
    """
    message = json_arg(message_text, "--message")
    with open_app(database) as app:  # it exits with the code of each refusal
        sent = app.send(run_id, topic, message, idempotency_key=idempotency_key)
    data = {"runId": sent.run_id, "topic": sent.topic, "seq": sent.seq, "created": sent.created}
    note = "sent" if sent.created else "already sent with this key"
    emit(data, output, lambda: click.echo(f"{run_id}: message {sent.seq} on {topic!r} {note}"))


@click.command("value")
@database_option
@output_option
@click.option(
    "--wait",
    callback=duration,
    metavar="DURATION",
    default="0s",
    show_default=True,
    help="How long to wait for the run to publish a first value (e.g. 30s).",
)
@click.argument("run_id")
@click.argument("key")
def runs_value(database: str, output: str | None, wait: float, run_id: str, key: str) -> None:
    """The latest value the run published with ctx.set_event(KEY).

    Exit 3 for an unknown run, or when the run has published no KEY by the end of the wait;
    2 for a bad key.
    """
    with open_app(database) as app:  # it exits with the code of each refusal
        app.get_event(run_id, key, wait=wait)  # checks the run and key; waits for a value
        found, value = app.monitor.run_value(run_id, key)
    if not found:
        click.echo(f"error: run {run_id} has published no value under {key!r}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    data = {"runId": run_id, "key": key, "value": value}
    emit(data, output, lambda: click.echo(json.dumps(value, indent=2, ensure_ascii=False)))
