"""The ``longcall`` command; ``longcall jobs`` lives in :mod:`longcall.cli.jobs`, what the
commands share (exit codes, options, opening the App) in :mod:`longcall.cli._support`."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

import click

from longcall.cli._metrics import serve_metrics, with_metrics_options
from longcall.cli._support import (
    EXIT_CHECK_FAILED,
    EXIT_CODES,
    EXIT_DATABASE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    LongcallGroup,
    database_option,
    duration,
    emit,
    json_arg,
    load_object,
    local_time,
    open_app,
    output_option,
)
from longcall.cli.cron import cron
from longcall.cli.jobs import jobs
from longcall.cli.mcp import mcp
from longcall.cli.prune import keep_option, prune
from longcall.cli.queues import queues
from longcall.cli.runs import runs
from longcall.core.retention import Retention
from longcall.errors import ConfigError, LongcallError, StoreError
from longcall.logs import LOG_FORMATS
from longcall.logs import configure as configure_logging
from longcall.shapes import iso


@click.group(cls=LongcallGroup, epilog=EXIT_CODES)
@click.version_option(package_name="longcall")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    envvar="LONGCALL_LOG_FORMAT",
    show_default=True,
    help="Log lines as text, or as one JSON object each (with job_id, run_id, session_id).",
)
def main(verbose: int, log_format: str) -> None:
    """longcall: durable long-running tool calls for AI agents."""
    configure_logging(logging.WARNING - 10 * min(verbose, 2), log_format)


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
@click.option(
    "--in-process",
    is_flag=True,
    help="The older demo: no server, a fake clock, the 45 minutes in an instant.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Afterwards keep the server (API, dashboard, worker) running until Ctrl-C/SIGTERM.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 for the server; 0 picks a free one.",
)
def demo(database: str | None, adk: bool, in_process: bool, serve: bool, port: int) -> None:
    """Play the worked example through the service and check every step.

    A real server on a local port, the agent's session, a report handed to a simulated batch
    system that posts a signed webhook (twice), the resumed answer, and a deadline that
    passes; the 45-minute deadline is played as a few seconds. Exits 0 only when every
    check passed. Needs the server extra: pip install 'longcall[server]'.
    """
    if in_process and (serve or port):
        raise click.UsageError("--serve and --port need the server; drop --in-process")
    if adk:
        try:
            import longcall.adk  # noqa: F401
        except ImportError as exc:
            raise click.UsageError(str(exc)) from exc
    if in_process:
        from longcall.cli._demo import run_demo

        sys.exit(run_demo(database, adk=adk))
    try:
        from longcall.cli._demo_service import run_service_demo
    except ImportError:
        click.echo(
            "error: longcall demo runs a server, which needs the server extra: "
            "pip install 'longcall[server]' (or play it without: longcall demo --in-process)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    sys.exit(run_service_demo(database, adk=adk, serve=serve, port=port))


@main.command()
@database_option
@output_option
def doctor(database: str, output: str | None) -> None:
    """Check the database, schema, settings, webhook secrets, tokens and extras.

    Each check is ok, warn or fail. Exits 0 without a fail, 1 with one, 4 when the database
    cannot be reached. Reads only: a missing SQLite file is reported, not created.
    """
    import os

    from longcall.cli._doctor import diagnose

    source = click.get_current_context().get_parameter_source("database")
    origin = "the default"
    if source is click.core.ParameterSource.COMMANDLINE:
        origin = "--database"
    elif source is click.core.ParameterSource.ENVIRONMENT:
        origin = "LONGCALL_DATABASE_URL"
    try:
        report = diagnose(database, os.environ, origin=origin)
    except StoreError as exc:
        click.echo(f"error: database: {exc}", err=True)
        sys.exit(EXIT_DATABASE)
    data = [asdict(c) for c in report.checks]

    def table() -> None:
        from rich.console import Console
        from rich.table import Table

        marks = {
            "ok": "[green]ok[/green]",
            "warn": "[yellow]warn[/yellow]",
            "fail": "[red]fail[/red]",
        }
        t = Table("check", "status", "message")
        for c in report.checks:
            t.add_row(c.check, marks[c.status], c.message)
        Console().print(t)

    emit(data, output, table)
    if not report.reachable:
        sys.exit(EXIT_DATABASE)
    if report.failed:
        sys.exit(EXIT_CHECK_FAILED)


@main.command()
@database_option
@click.option("--check", is_flag=True, help="Only check; exit 1 when a migration is pending.")
def migrate(database: str, check: bool) -> None:
    """Create or upgrade the schema (safe to run from several processes at once)."""
    from longcall.core.clock import SystemClock
    from longcall.store import latest_version, open_store

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


def _load_app_and_agent(app_spec: str, agent_spec: str) -> tuple[Any, Any]:
    """The user's App and AgentRunner (or a function of the App returning one)."""
    from longcall.agents import AgentRunner
    from longcall.app import App

    app = load_object(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    agent = load_object(agent_spec, "--agent")
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
    default=None,
    help="Your App, as package.module:name (env LONGCALL_APP); optional with --adk.",
)
@click.option(
    "--agent",
    "agent_spec",
    envvar="LONGCALL_AGENT",
    default=None,
    help="Your AgentRunner (or a function of the App returning one), as "
    "package.module:name (env LONGCALL_AGENT); without it, no deliveries to an agent.",
)
@click.option(
    "--adk",
    "agents_dir",
    metavar="AGENTS_DIR",
    default=None,
    help="Resume the apps that `adk api_server AGENTS_DIR` / `adk web AGENTS_DIR` serve: "
    "the same folder of agents, each built into the same Runner as ADK's server builds.",
)
@click.option(
    "--session-service-uri",
    "--session_service_uri",
    "session_service_uri",
    metavar="URI",
    default=None,
    help="With --adk: the ADK server's --session_service_uri (a store both processes share; "
    "memory:// cannot work).",
)
@click.option(
    "--extra_plugins",
    "--extra-plugins",
    "extra_plugins",
    multiple=True,
    help="With --adk: the ADK server's --extra_plugins (comma-separated or repeated).",
)
@click.option(
    "--database",
    envvar="LONGCALL_DATABASE_URL",
    default="sqlite:///longcall.db",
    show_default=True,
    help="With --adk and no --app: longcall's database (env LONGCALL_DATABASE_URL).",
)
@click.option(
    "--lease", default="60s", show_default=True, callback=duration, help="Claim and session lease."
)
@click.option(
    "--poll", default="1s", show_default=True, callback=duration, help="Polling interval."
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    default=8,
    show_default=True,
    help="Background runs executed at once.",
)
@click.option(
    "--deliveries",
    type=click.IntRange(1, 10_000),
    default=16,
    show_default=True,
    help="Sessions delivered to at once (each still one delivery at a time, in order).",
)
@click.option(
    "--queue",
    "queue_names",
    multiple=True,
    help="Run only this named queue's runs (repeat for more); default: every queue and "
    "the runs of none.",
)
@keep_option
@with_metrics_options
def worker(
    app_spec: str | None,
    agent_spec: str | None,
    agents_dir: str | None,
    session_service_uri: str | None,
    extra_plugins: tuple[str, ...],
    database: str,
    lease: float,
    poll: float,
    concurrency: int,
    deliveries: int,
    queue_names: tuple[str, ...],
    keep: Retention,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the worker loops until SIGTERM: deliveries to the agent, deadlines, submissions,
    the background runs of the App's workflows, and the removal of finished work past its
    retention period (--keep).

    With --adk AGENTS_DIR --session-service-uri URI (the flags of the `adk api_server` it
    runs beside), it resumes the calls of every app in AGENTS_DIR."""
    from longcall.app import App

    if agents_dir is not None:
        _adk_worker(
            app_spec,
            agent_spec,
            agents_dir,
            session_service_uri,
            extra_plugins,
            database,
            lease=lease,
            poll=poll,
            concurrency=concurrency,
            deliveries=deliveries,
            retention=keep,
            metrics=(metrics_host, metrics_port),
        )
        return
    if session_service_uri or extra_plugins:
        raise click.UsageError("--session-service-uri and --extra_plugins go with --adk")
    if not app_spec:
        raise click.UsageError("give --app (or env LONGCALL_APP), or --adk AGENTS_DIR")
    if agent_spec:
        app, agent = _load_app_and_agent(app_spec, agent_spec)
        options: dict[str, Any] = {
            "lease": lease,
            "poll_interval": poll,
            "deliveries": deliveries,
        }
    else:
        app, agent, options = load_object(app_spec, "--app"), None, {}
        if not isinstance(app, App):
            raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
        if not app.workflows.registry:
            raise click.UsageError("nothing to do: give --agent, or register workflows on the App")
    if queue_names:
        options["run_queues"] = list(queue_names)
    runner = app.worker(agent, run_concurrency=concurrency, retention=keep, **options)
    serve_metrics(app, metrics_host, metrics_port)
    click.echo(f"longcall worker {app.holder} on {app.dialect}", err=True)
    try:
        asyncio.run(runner.run())
    finally:
        app.close()


def _adk_worker(
    app_spec: str | None,
    agent_spec: str | None,
    agents_dir: str,
    session_service_uri: str | None,
    extra_plugins: tuple[str, ...],
    database: str,
    *,
    lease: float,
    poll: float,
    concurrency: int,
    deliveries: int,
    retention: Retention,
    metrics: tuple[str, int | None],
) -> None:
    """``longcall worker --adk``: every app of an ``adk api_server`` folder, resumed here."""
    from longcall.app import App

    if agent_spec:
        raise click.UsageError("--adk builds the agents itself; leave out --agent")
    if not session_service_uri:
        raise click.UsageError(
            "--adk needs --session-service-uri: the same persistent session store as the "
            "ADK server's --session_service_uri, so both processes see the same sessions"
        )
    try:
        from longcall.adk.server_apps import build_server_apps
    except ImportError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        server_apps = build_server_apps(agents_dir, session_service_uri, extra_plugins)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    options = {
        "run_concurrency": concurrency,
        "lease": lease,
        "poll_interval": poll,
        "deliveries": deliveries,
        "retention": retention,
    }
    if not app_spec:
        # The same database as the server's LongcallPlugin (LONGCALL_DATABASE_URL).
        with open_app(database, migrate=True) as app:
            _run_adk_workers(app, server_apps, options, metrics)
        return
    app = load_object(app_spec, "--app")
    if not isinstance(app, App):
        raise click.BadParameter(f"{app_spec} is a {type(app).__name__}, not a longcall.App")
    try:
        _run_adk_workers(app, server_apps, options, metrics)
    finally:
        app.close()


def _run_adk_workers(
    app: Any, server_apps: list[Any], options: dict[str, Any], metrics: tuple[str, int | None]
) -> None:
    from longcall.adk.server_apps import adk_workers

    workers = adk_workers(app, server_apps, **options)
    serve_metrics(app, *metrics)
    names = ", ".join(s.name for s in server_apps)
    click.echo(f"longcall worker {app.holder} on {app.dialect}; ADK apps: {names}", err=True)
    asyncio.run(_run_workers(workers))


async def _run_workers(workers: list[Any]) -> None:
    """Run several workers in this loop; SIGTERM/SIGINT drain them all."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: [w.stop() for w in workers])
    try:
        await asyncio.gather(*(w.run(handle_signals=False) for w in workers))
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


main.add_command(jobs)
main.add_command(runs)
main.add_command(queues)
main.add_command(cron)
main.add_command(prune)
main.add_command(mcp)


def _public_origin(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--public-origin`` as scheme://host[:port], nothing after it."""
    if not value:
        return None
    parts = urlsplit(value.strip())
    try:
        has_port_if_any = parts.port is None or parts.port > 0
    except ValueError:
        has_port_if_any = False
    extra = parts.query or parts.fragment or parts.username or parts.password
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or not has_port_if_any
        or parts.path not in ("", "/")
        or extra
    ):
        raise click.BadParameter(f"{value!r} is not an origin such as https://longcall.example.com")
    return f"{parts.scheme}://{parts.netloc}"


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
    callback=duration,
    help="How old a signed delivery may be.",
)
@click.option(
    "--login-ttl",
    envvar="LONGCALL_LOGIN_TTL",
    default="12h",
    show_default=True,
    callback=duration,
    help="How long a dashboard login lasts (env LONGCALL_LOGIN_TTL).",
)
@click.option(
    "--public-origin",
    envvar="LONGCALL_PUBLIC_ORIGIN",
    default=None,
    callback=_public_origin,
    help="scheme://host[:port] browsers reach the dashboard at through a proxy "
    "(env LONGCALL_PUBLIC_ORIGIN); its login form is accepted from there too.",
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
@click.option(
    "--deliveries",
    type=click.IntRange(1, 10_000),
    default=16,
    show_default=True,
    help="With --agent: sessions the worker loops deliver to at once.",
)
@click.option(
    "--writes-per-token",
    envvar="LONGCALL_WRITES_PER_TOKEN",
    type=click.IntRange(1, 10_000),
    default=4,
    show_default=True,
    help="Writes one token may have in progress at once; more are answered 429.",
)
def serve(
    database: str,
    host: str,
    port: int,
    tolerance: float,
    login_ttl: float,
    public_origin: str | None,
    app_spec: str | None,
    agent_spec: str | None,
    no_worker: bool,
    deliveries: int,
    writes_per_token: int,
) -> None:
    """Run the HTTP service, and with --app/--agent the worker loops too, until SIGTERM."""
    try:
        from longcall.server import mcp_mount, runner
        from longcall.server.app import Settings
    except ImportError as exc:
        raise click.UsageError(str(exc)) from exc

    if agent_spec and not app_spec:
        raise click.UsageError("--agent needs --app (the App whose tools the agent calls)")
    if login_ttl <= 0:
        raise click.BadParameter("a login must last longer than 0s", param_hint="--login-ttl")
    settings = Settings(
        tolerance=tolerance,
        login_ttl=login_ttl,
        public_origin=public_origin,
        writes_per_token=writes_per_token,
    )
    if app_spec:
        from longcall.app import App

        if agent_spec:
            app, agent = _load_app_and_agent(app_spec, agent_spec)
        else:
            app, agent = load_object(app_spec, "--app"), None
            if not isinstance(app, App):
                raise click.BadParameter(f"{app_spec} is not a longcall.App")
    else:
        app, agent = None, None

    try:
        listening = runner.listen(host, port)
    except OSError as exc:
        raise click.UsageError(f"cannot serve on {host}:{port}: {exc}") from exc

    async def run(app: Any) -> None:
        loops = runner.worker_duties(app, agent) if not no_worker else []
        where = "; worker: " + ", ".join(loops) if loops else "; no worker loops"
        bound = listening.getsockname()
        served = (
            "API, dashboard and MCP tasks at /mcp" if mcp_mount.available() else "API and dashboard"
        )
        click.echo(
            f"longcall serving {app.url} on http://{host}:{bound[1]}: {served}{where}\n"
            f"dashboard: open http://{host}:{bound[1]}/login and paste a token "
            "(longcall tokens create --user NAME makes one)",
            err=True,
        )
        await runner.serve(
            app,
            agent=agent,
            worker=not no_worker,
            deliveries=deliveries,
            settings=settings,
            host=host,
            port=bound[1],
            sockets=[listening],
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
    with open_app(database, migrate=True) as own:
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
    fresh = _new_secret()
    with open_app(database, migrate=False) as app:
        secret = app.access.add_webhook_secret(source, fresh)
    data = {
        "source": source,
        "secretId": secret.secret_id,
        "secret": secret.secret,
        "url": f"/v1/hooks/{source}",
    }
    emit(
        data,
        output,
        lambda: click.echo(
            f"source {source}: secret {secret.secret_id}\n{secret.secret}\n"
            f"deliveries go to POST /v1/hooks/{source}; keep the secret safe"
        ),
    )


def _new_secret() -> str:
    try:
        from longcall.webhooks import new_secret
    except ImportError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    return new_secret()


@hooks.command("rotate")
@database_option
@output_option
@click.argument("source")
@click.option(
    "--retire-others",
    is_flag=True,
    help="Retire every older secret of SOURCE at once (a leaked secret). Without it they "
    "keep verifying until `hooks retire`, so the sender can switch without a refusal.",
)
def hooks_rotate(database: str, output: str | None, source: str, retire_others: bool) -> None:
    """Add a new secret to SOURCE and print it; the older ones stay valid unless retired."""
    fresh = _new_secret()
    with open_app(database, migrate=False) as app:
        older = app.access.webhook_secrets(source)
        if not older:
            click.echo(
                f"error: no source {source!r} to rotate; create it with `longcall hooks add "
                f"{source}`",
                err=True,
            )
            sys.exit(EXIT_NOT_FOUND)
        # The new secret first: a crash in between leaves both valid, never neither.
        secret = app.access.add_webhook_secret(source, fresh)
        retired = [
            s.secret_id
            for s in older
            if retire_others and app.access.retire_webhook_secret(source, s.secret_id)
        ]
    still = [s.secret_id for s in older if s.secret_id not in retired]
    data = {
        "source": source,
        "secretId": secret.secret_id,
        "secret": secret.secret,
        "url": f"/v1/hooks/{source}",
        "stillValid": still,
        "retired": retired,
    }

    def text() -> None:
        click.echo(f"source {source}: new secret {secret.secret_id}\n{secret.secret}")
        if retired:
            click.echo(f"retired {', '.join(retired)}: deliveries signed with them are refused")
        for old_id in still:
            click.echo(
                f"{old_id} still verifies; once the sender signs with the new secret: "
                f"longcall hooks retire {source} {old_id}"
            )

    emit(data, output, text)


@hooks.command("list")
@database_option
@output_option
def hooks_list(database: str, output: str | None) -> None:
    """List sources and their secret ids (never the secrets)."""
    with open_app(database, migrate=False) as app:
        found = app.access.webhook_secrets()
    data = [
        {"source": s.source, "secretId": s.secret_id, "createdAt": iso(s.created_at)} for s in found
    ]

    def table() -> None:
        for s in found:
            click.echo(f"{s.source}\t{s.secret_id}\t{local_time(s.created_at)}")

    emit(data, output, table)


@hooks.command("retire")
@database_option
@click.argument("source")
@click.argument("secret_id")
def hooks_retire(database: str, source: str, secret_id: str) -> None:
    """Stop accepting deliveries signed with SECRET_ID (after a rotation)."""
    with open_app(database, migrate=False) as app:
        if not app.access.retire_webhook_secret(source, secret_id):
            click.echo(f"error: {source!r} has no secret {secret_id!r}", err=True)
            sys.exit(EXIT_NOT_FOUND)
    click.echo(f"retired {secret_id} of {source}")


@hooks.command("sign")
@database_option
@output_option
@click.argument("source")
@click.option("--body", required=True, help="The JSON body to sign, exactly as it will be sent.")
def hooks_sign(database: str, output: str | None, source: str, body: str) -> None:
    """Print the headers of a test delivery to SOURCE, signed with its newest secret."""
    from longcall.webhooks import sign

    json_arg(body, "--body")
    with open_app(database, migrate=False) as app:
        secrets = app.access.webhook_secrets(source)
    if not secrets:
        click.echo(f"error: no secret for {source!r}; run `longcall hooks add {source}`", err=True)
        sys.exit(EXIT_NOT_FOUND)
    headers = sign(body.encode(), secrets[-1].secret)
    emit(
        headers,
        output,
        lambda: click.echo("\n".join(f"{name}: {value}" for name, value in headers.items())),
    )


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
    with open_app(database, migrate=False) as app:
        info, token = app.access.create_token(user_id=user_id, admin=admin)
    data = {"tokenId": info.token_id, "userId": info.user_id, "admin": info.admin, "token": token}
    emit(
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
    with open_app(database, migrate=False) as app:
        found = app.access.tokens()
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

    emit(data, output, table)


@tokens.command("revoke")
@database_option
@click.argument("token_id")
def tokens_revoke(database: str, token_id: str) -> None:
    """Revoke a token by its id; requests with it then answer 401."""
    with open_app(database, migrate=False) as app:
        if not app.access.revoke_token(token_id):
            click.echo(f"error: no active token {token_id!r}", err=True)
            sys.exit(EXIT_NOT_FOUND)
    click.echo(f"revoked {token_id}")
