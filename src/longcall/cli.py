"""The ``longcall`` command.

Exit codes, one meaning each: 0 done; 1 a check failed (the demo, ``migrate --check``);
2 bad usage (click's own); 3 no such job; 4 the database is unreachable or its schema is not
this version's; 5 the request conflicts with the job's state (e.g. a completion that changed
nothing with ``--strict``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import click

from longcall.errors import JobNotFound, LongcallError, SchemaError, StoreError

EXIT_CHECK_FAILED = 1
EXIT_NOT_FOUND = 3
EXIT_DATABASE = 4
EXIT_CONFLICT = 5

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


def _json_arg(value: str | None, what: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what} is not valid JSON: {exc}") from exc


@contextmanager
def _app(database: str, *, migrate: bool = False) -> Iterator[Any]:
    from longcall.app import App

    try:
        app = App(database, migrate=migrate)
    except SchemaError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    except StoreError as exc:
        click.echo(f"error: cannot use the database {database!r}: {exc}", err=True)
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


def _emit(data: Any, output: str | None, table: Callable[[], None]) -> None:
    if output == "json" or (output is None and not sys.stdout.isatty()):
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        table()


def _job_dict(job: Any) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    data["delivery"] = job.delivery.value
    return data


@click.group()
@click.version_option(package_name="longcall")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def main(verbose: int) -> None:
    """longcall: durable long-running tool calls for AI agents."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@click.option(
    "--database",
    envvar="LONGCALL_DATABASE_URL",
    default=None,
    help="Database URL (default: a throwaway SQLite file).",
)
@click.option(
    "--adk",
    is_flag=True,
    help="Play it on google-adk (extra 'adk'); Gemini when GOOGLE_API_KEY is set.",
)
def demo(database: str | None, adk: bool) -> None:
    """Play the worked example: a 19-minute report, a duplicate, a deadline."""
    from longcall.demo import run_demo

    if adk:
        try:
            import longcall.adk  # noqa: F401
        except ImportError as exc:
            raise click.UsageError(str(exc)) from exc
    sys.exit(run_demo(database, adk=adk))


@main.command()
@database_option
@click.option("--check", is_flag=True, help="Only check; exit 1 when a migration is pending.")
def migrate(database: str, check: bool) -> None:
    """Create or upgrade the schema (safe to run from several processes at once)."""
    from longcall.clock import SystemClock
    from longcall.store import open_store
    from longcall.store.queries import latest_version

    try:
        store = open_store(database, SystemClock())
    except LongcallError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    try:
        if check:
            current = store.schema_version()
            latest = latest_version(store.dialect)
            click.echo(f"schema version {current or 0}, this longcall needs {latest}")
            sys.exit(0 if current == latest else EXIT_CHECK_FAILED)
        before = store.schema_version()
        applied = store.migrate()
        version = store.schema_version()
        if applied and before is None:
            click.echo(f"created the schema; schema version {version}")
        elif applied:
            steps = ", ".join(map(str, applied))
            click.echo(f"applied migration(s) {steps}; schema version {version}")
        else:
            click.echo(f"schema version {version} is current; nothing to do")
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    finally:
        store.close()


def _load(spec: str, what: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{what} must look like package.module:name, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise click.BadParameter(f"{module_name!r} has no {attr!r}") from exc


def _load_app_and_agent(app_spec: str, agent_spec: str) -> tuple[Any, Any]:
    """The user's App and AgentRunner (or a function of the App returning one)."""
    from longcall.agents import AgentRunner
    from longcall.app import App

    app = _load(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    agent = _load(agent_spec, "--agent")
    if not isinstance(agent, AgentRunner) and callable(agent):
        agent = agent(app)
    if not isinstance(agent, AgentRunner):
        raise click.BadParameter(f"{agent_spec} is not an AgentRunner")
    return app, agent


@main.command()
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    required=True,
    help="Your App, as package.module:name (env LONGCALL_APP).",
)
@click.option(
    "--agent",
    "agent_spec",
    envvar="LONGCALL_AGENT",
    required=True,
    help="Your AgentRunner (or a function of the App returning one), as "
    "package.module:name (env LONGCALL_AGENT).",
)
@click.option("--lease", default="60s", show_default=True, help="Claim and session lease.")
@click.option("--poll", default="1s", show_default=True, help="Polling interval.")
def worker(app_spec: str, agent_spec: str, lease: str, poll: str) -> None:
    """Run the dispatcher, resumer and sweeper until SIGTERM."""
    app, agent = _load_app_and_agent(app_spec, agent_spec)
    runner = app.worker(agent, lease=lease, poll_interval=poll)
    click.echo(f"longcall worker {runner.resumer.holder} on {app.store.dialect}", err=True)
    try:
        asyncio.run(runner.run())
    finally:
        app.close()


@main.group()
def jobs() -> None:
    """Look at jobs and complete them by hand."""


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
    from longcall.jobs import JobState

    with _app(database) as app:
        found = app.list_jobs(
            state=JobState(state) if state else None,
            tool_name=tool_name,
            session_id=session_id,
            limit=limit,
        )

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        t = Table("job", "tool", "state", "delivery", "session", "call")
        for job in found:
            t.add_row(
                job.job_id,
                job.tool_name,
                job.state.value,
                job.delivery.value,
                job.session_id or "",
                job.call_id or "",
            )
        Console().print(t)

    _emit([_job_dict(j) for j in found], output, table)


@jobs.command("show")
@database_option
@output_option
@click.argument("job_id")
def jobs_show(database: str, output: str | None, job_id: str) -> None:
    """A job with its event log."""
    with _app(database) as app:
        job = app.get_job(job_id)
        events = app.job_events(job_id)
    data = {**_job_dict(job), "events": [asdict(e) for e in events]}

    def table() -> None:
        from rich.console import Console

        console = Console()
        for key, value in _job_dict(job).items():
            if value is not None:
                console.print(f"[bold]{key:>14}[/bold]  {value}", highlight=False)
        for event in events:
            console.print(f"{'event':>14}  #{event.seq} {event.kind} {event.data}", highlight=False)

    _emit(data, output, table)


def _finish(outcome: Any, output: str | None, strict: bool) -> None:
    data = {"changed": outcome.changed, "job": _job_dict(outcome.job)}
    _emit(
        data,
        output,
        lambda: click.echo(
            f"{outcome.job.job_id}: {outcome.job.state.value}"
            + ("" if outcome.changed else " (unchanged: it had finished already)")
        ),
    )
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
    value = _json_arg(result, "--result")
    with _app(database) as app:
        _finish(app.complete(job_id, value), output, strict)


@jobs.command("fail")
@database_option
@output_option
@strict_option
@click.argument("job_id")
@click.option("--error", required=True, help="What went wrong.")
def jobs_fail(database: str, output: str | None, strict: bool, job_id: str, error: str) -> None:
    """Fail a job."""
    with _app(database) as app:
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
    with _app(database) as app:
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
    value = _json_arg(data, "--data")
    with _app(database) as app:
        job = app.progress(job_id, value, notify_model=notify_model)
    if job is None:
        click.echo(f"{job_id} has finished already; progress ignored", err=True)
        sys.exit(EXIT_CONFLICT)
    _emit(_job_dict(job), output, lambda: click.echo(f"{job_id}: progress #{job.progress_seq}"))


@main.command()
@database_option
@click.option(
    "--host",
    envvar="LONGCALL_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (env LONGCALL_HOST); 127.0.0.1 keeps it local.",
)
@click.option(
    "--port",
    envvar="LONGCALL_PORT",
    type=click.IntRange(0, 65535),
    default=8800,
    show_default=True,
    help="Port (env LONGCALL_PORT); 0 picks a free one.",
)
@click.option(
    "--tolerance",
    envvar="LONGCALL_WEBHOOK_TOLERANCE",
    default="5m",
    show_default=True,
    help="How old a signed delivery may be.",
)
@click.option(
    "--app",
    "app_spec",
    envvar="LONGCALL_APP",
    default=None,
    help="Your App, as package.module:name; its database wins over --database.",
)
@click.option(
    "--agent",
    "agent_spec",
    envvar="LONGCALL_AGENT",
    default=None,
    help="Your AgentRunner, as package.module:name: runs the worker loops here.",
)
@click.option("--no-worker", is_flag=True, help="Serve the API only, even with an --agent.")
def serve(
    database: str,
    host: str,
    port: int,
    tolerance: str,
    app_spec: str | None,
    agent_spec: str | None,
    no_worker: bool,
) -> None:
    """Run the HTTP service, and with --app/--agent the worker loops too, until SIGTERM."""
    try:
        from longcall.server import runner
        from longcall.server.app import Settings
    except ImportError as exc:
        raise click.UsageError(str(exc)) from exc
    from longcall.jobs import parse_duration

    if agent_spec and not app_spec:
        raise click.UsageError("--agent needs --app (the App whose tools the agent calls)")
    settings = Settings(tolerance=parse_duration(tolerance))
    if app_spec:
        from longcall.app import App

        if agent_spec:
            app, agent = _load_app_and_agent(app_spec, agent_spec)
        else:
            app, agent = _load(app_spec, "--app"), None
            if not isinstance(app, App):
                raise click.BadParameter(f"{app_spec} is not a longcall.App")
    else:
        app, agent = None, None

    async def run(app: Any) -> None:
        where = "with the worker loops" if agent is not None and not no_worker else "API only"
        click.echo(f"longcall serving {app.url} on http://{host}:{port}, {where}", err=True)
        await runner.serve(
            app, agent=agent, worker=not no_worker, settings=settings, host=host, port=port
        )

    # uvicorn raises the signal again after draining, under the handler it found: this one,
    # so a drained shutdown goes on to stop the worker and exits 0 instead of dying.
    signal.signal(signal.SIGTERM, lambda *_: None)
    if app is not None:
        try:
            asyncio.run(run(app))
        finally:
            app.close()
        return
    with _app(database, migrate=True) as own:
        asyncio.run(run(own))


@main.group()
def hooks() -> None:
    """Webhook sources and their signing secrets."""


@hooks.command("add")
@database_option
@output_option
@click.argument("source")
def hooks_add(database: str, output: str | None, source: str) -> None:
    """Create SOURCE with a new secret, or add a second secret to rotate to; prints it."""
    from longcall.webhooks import new_secret

    with _app(database, migrate=False) as app:
        secret = app.store.add_hook_secret(source, new_secret())
    data = {
        "source": source,
        "secretId": secret.secret_id,
        "secret": secret.secret,
        "url": f"/v1/hooks/{source}",
    }
    _emit(
        data,
        output,
        lambda: click.echo(
            f"source {source}: secret {secret.secret_id}\n{secret.secret}\n"
            f"deliveries go to POST /v1/hooks/{source}; keep the secret safe"
        ),
    )


@hooks.command("list")
@database_option
@output_option
def hooks_list(database: str, output: str | None) -> None:
    """List sources and their secret ids (never the secrets)."""
    with _app(database, migrate=False) as app:
        found = app.store.hook_secrets()
    data = [{"source": s.source, "secretId": s.secret_id, "createdAt": s.created_at} for s in found]

    def table() -> None:
        for item in data:
            click.echo(f"{item['source']}\t{item['secretId']}")

    _emit(data, output, table)


@hooks.command("retire")
@database_option
@click.argument("source")
@click.argument("secret_id")
def hooks_retire(database: str, source: str, secret_id: str) -> None:
    """Stop accepting deliveries signed with SECRET_ID (after a rotation)."""
    with _app(database, migrate=False) as app:
        if not app.store.retire_hook_secret(source, secret_id):
            click.echo(f"error: {source!r} has no secret {secret_id!r}", err=True)
            sys.exit(EXIT_NOT_FOUND)
    click.echo(f"retired {secret_id} of {source}")


@hooks.command("sign")
@database_option
@click.argument("source")
@click.option("--body", required=True, help="The JSON body to sign, exactly as it will be sent.")
def hooks_sign(database: str, source: str, body: str) -> None:
    """Print the headers of a test delivery to SOURCE, signed with its newest secret."""
    from longcall.webhooks import sign

    _json_arg(body, "--body")
    with _app(database, migrate=False) as app:
        secrets = app.store.hook_secrets(source)
    if not secrets:
        click.echo(f"error: no secret for {source!r}; run `longcall hooks add {source}`", err=True)
        sys.exit(EXIT_NOT_FOUND)
    for name, value in sign(body.encode(), secrets[-1].secret).items():
        click.echo(f"{name}: {value}")


@main.group()
def tokens() -> None:
    """API bearer tokens (stored hashed; shown once)."""


@tokens.command("create")
@database_option
@output_option
@click.option("--user", "user_id", help="The user whose jobs the token sees and changes.")
@click.option("--admin", is_flag=True, help="A token that sees every user's jobs.")
def tokens_create(database: str, output: str | None, user_id: str | None, admin: bool) -> None:
    """Create a token for --user (or an --admin token) and print it once."""
    if not admin and not user_id:
        raise click.UsageError("give --user NAME, or --admin")
    with _app(database, migrate=False) as app:
        info, token = app.store.create_token(user_id=user_id, admin=admin)
    data = {"tokenId": info.token_id, "userId": info.user_id, "admin": info.admin, "token": token}
    _emit(
        data,
        output,
        lambda: click.echo(
            f"token {info.token_id} for {'every user (admin)' if admin else user_id}:\n{token}"
        ),
    )


@tokens.command("list")
@database_option
@output_option
def tokens_list(database: str, output: str | None) -> None:
    """List token ids, users and whether they are revoked (never the tokens)."""
    with _app(database, migrate=False) as app:
        found = app.store.tokens()
    data = [
        {
            "tokenId": t.token_id,
            "userId": t.user_id,
            "admin": t.admin,
            "revoked": t.revoked_at is not None,
        }
        for t in found
    ]

    def table() -> None:
        for t in data:
            state = "revoked" if t["revoked"] else "active"
            click.echo(f"{t['tokenId']}\t{'admin' if t['admin'] else t['userId']}\t{state}")

    _emit(data, output, table)


@tokens.command("revoke")
@database_option
@click.argument("token_id")
def tokens_revoke(database: str, token_id: str) -> None:
    """Revoke a token by its id; requests with it then answer 401."""
    with _app(database, migrate=False) as app:
        if not app.store.revoke_token(token_id):
            click.echo(f"error: no active token {token_id!r}", err=True)
            sys.exit(EXIT_NOT_FOUND)
    click.echo(f"revoked {token_id}")
