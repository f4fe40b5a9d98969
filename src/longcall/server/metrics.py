"""``GET /metrics`` (and ``longcall worker --metrics-port``): Prometheus text, one registry
per process.

Job counts and the runs not finished (by status, the age of the oldest queued) come from the
store at scrape time, kept or indexed so that a scrape reads a few rows however many jobs and
runs are stored, and are the same whichever process asks. The rest is counted by the process
that did the work: webhook outcomes by the server that answered them; deliveries and their
latency, runs ended, task durations and cron occurrences by the worker loops running in this
process (``longcall serve --agent``, ``longcall worker``). Unauthenticated like the health
checks: it says how many, never what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import Job
from longcall.core.observed import CronFired, CronMisfired, Observed, RunEnded, TaskDone
from longcall.errors import StoreError
from longcall.server.errors import error

# From a webhook that lands while the agent waits, to hours for a person's approval.
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
# From a lookup in a millisecond to an export that takes an hour.
TASK_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120, 600, 3600)


class _JobCounts(Collector):
    def __init__(self, app: App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "longcall_jobs", "Jobs by state and delivery.", labels=["state", "delivery"]
        )
        for (state, delivery), count in sorted(self.app.monitor.job_counts().items()):
            family.add_metric([state, delivery], count)
        yield family


class _RunBacklog(Collector):
    def __init__(self, app: App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        backlog = self.app.monitor.run_backlog()
        runs = GaugeMetricFamily(
            "longcall_runs", "Runs not finished, by status.", labels=["status"]
        )
        for status, count in sorted(backlog.counts.items()):
            runs.add_metric([status], count)
        yield runs
        age = 0.0
        if backlog.oldest_queued_at is not None:
            age = max(0.0, self.app.clock.now() - backlog.oldest_queued_at)
        yield GaugeMetricFamily(
            "longcall_run_queue_oldest_age_seconds",
            "How long the oldest queued run has been claimable (0: none queued).",
            value=age,
        )


class Metrics:
    def __init__(self, app: App) -> None:
        self.app = app
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_JobCounts(app))
        self.registry.register(_RunBacklog(app))
        self.webhooks = Counter(
            "longcall_webhook_deliveries",
            "Deliveries to POST /v1/hooks/{source}, by outcome.",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.deliveries = Counter(
            "longcall_deliveries",
            "Function responses handed to the agent by this process, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "longcall_delivery_latency_seconds",
            "From a job's result to the agent's session having it.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.runs_ended = Counter(
            "longcall_runs_ended",
            "Executions of runs ended by this process, by workflow and how (completed, failed, "
            "cancelled, or retrying: failed with an attempt left).",
            ["workflow", "status"],
            registry=self.registry,
        )
        self.tasks = Histogram(
            "longcall_task_duration_seconds",
            "Task attempts run by this process, by workflow, task and outcome (ok, error).",
            ["workflow", "task", "outcome"],
            buckets=TASK_BUCKETS,
            registry=self.registry,
        )
        self.cron_fires = Counter(
            "longcall_cron_fires",
            "Schedule occurrences claimed by this process, by what they did.",
            ["outcome"],
            registry=self.registry,
        )
        self.cron_misfires = Counter(
            "longcall_cron_misfires",
            "Schedules that found occurrences older than the misfire grace, by their policy.",
            ["policy"],
            registry=self.registry,
        )
        app.delivery_listeners.append(self.delivered)
        app.observe(self.observed)

    def observed(self, fact: Observed) -> None:
        match fact:
            case TaskDone():
                outcome = "ok" if fact.ok else "error"
                self.tasks.labels(fact.workflow_id, fact.task, outcome).observe(fact.seconds)
            case RunEnded():
                self.runs_ended.labels(fact.workflow_id, fact.status).inc()
            case CronFired():
                self.cron_fires.labels(fact.outcome).inc()
            case CronMisfired():
                self.cron_misfires.labels(fact.policy).inc()

    def delivered(self, outcome: str, job: Job) -> None:
        self.deliveries.labels(outcome).inc()
        if outcome == "delivered" and job.finished_at is not None:
            self.latency.observe(max(0.0, self.app.clock.now() - job.finished_at))

    def counted(
        self, receive: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``receive`` (the webhook endpoint), counting each answer by its outcome."""

        async def endpoint(request: Request) -> Response:
            response = await receive(request)
            outcome = getattr(request.state, "webhook_outcome", None)
            # Only configured sources become labels: anyone can post to any path.
            source = getattr(request.state, "webhook_source", "(unknown)")
            self.webhooks.labels(source, outcome or f"refused_{response.status_code}").inc()
            return response

        return endpoint


async def metrics(request: Request) -> Response:
    """``GET /metrics`` (declared in ``server.api.health``)."""
    app: App = request.app.state.longcall
    registry = request.app.state.metrics.registry
    try:
        text = await app.in_thread(generate_latest, registry)
    except StoreError as exc:
        return error(503, "store_unavailable", f"the store could not be read: {exc}")
    return Response(text, media_type=CONTENT_TYPE_LATEST)
