"""``longcall worker --metrics-port``: the worker's Prometheus metrics where no server runs."""

from __future__ import annotations

from typing import Any

import click

metrics_options = [
    click.option(
        "--metrics-port",
        type=click.IntRange(1, 65535),
        default=None,
        envvar="LONGCALL_METRICS_PORT",
        help="Serve this worker's Prometheus metrics at http://HOST:PORT/metrics (env "
        "LONGCALL_METRICS_PORT; needs the server extra).",
    ),
    click.option(
        "--metrics-host",
        default="127.0.0.1",
        show_default=True,
        envvar="LONGCALL_METRICS_HOST",
        help="The address --metrics-port binds (0.0.0.0 for a scraper on another host).",
    ),
]


def with_metrics_options(command: Any) -> Any:
    for option in reversed(metrics_options):
        command = option(command)
    return command


def serve_metrics(app: Any, host: str, port: int | None) -> None:
    """Start serving ``app``'s metrics on a thread of their own (nothing without a port)."""
    if port is None:
        return
    try:
        from prometheus_client import start_http_server

        from longcall.server.metrics import Metrics
    except ImportError:
        raise click.UsageError(
            "--metrics-port needs the server extra: pip install 'longcall[server]'"
        ) from None
    metrics = Metrics(app)
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise click.UsageError(f"--metrics-port {port}: cannot listen on {host}: {exc}") from None
    click.echo(f"metrics at http://{host}:{port}/metrics", err=True)
