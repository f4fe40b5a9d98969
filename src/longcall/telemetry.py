"""OpenTelemetry spans (the ``otel`` extra: ``pip install 'longcall[otel]'``).

Spans come from the tracer named ``longcall`` of the App's ``tracer_provider``, or of the
global provider that ``opentelemetry.trace.set_tracer_provider`` set:

- ``longcall.tool_call``: a long-running tool starting (or finding) its job;
- ``longcall.complete``: a result, failure or cancel arriving (``longcall.completion.via``:
  ``webhook``, ``api``, ``cli`` or ``python``), with its outcome;
- ``longcall.deliver``: one message of function responses handed to a session, and inside
  it ``longcall.agent_turn``, the agent's resumed turn;
- ``longcall.run``: a workflow run's execution, up to its end or its next interrupt, and
  inside it ``longcall.task``: each task call that runs (a replayed one makes none).

A job keeps the W3C trace context (``traceparent``, ``tracestate``) of the span it was
created in. Its completion and its delivery happen later, often days later in another
process: their spans start a trace of their own (or join the one of the request that
carries them) and *link* to the span that started the job, as OpenTelemetry recommends for
work that outlives its cause, rather than stretching that call's trace over days.

Without opentelemetry installed every operation here does nothing, and so does it while no
tracer provider is configured (neither passed to the App nor set globally).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from longcall.core.jobs import Job

if TYPE_CHECKING:
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

P = ParamSpec("P")
T = TypeVar("T")

TRACER_NAME = "longcall"

# Attribute names, in the semantic conventions' style.
JOB_ID = "longcall.job.id"
JOB_IDS = "longcall.job.ids"
TOOL_NAME = "longcall.tool.name"
APP_NAME = "longcall.app.name"
USER_ID = "longcall.user.id"
SESSION_ID = "longcall.session.id"
CALL_ID = "longcall.call.id"
COMPLETION_VIA = "longcall.completion.via"
COMPLETION_STATE = "longcall.completion.state"
COMPLETION_OUTCOME = "longcall.completion.outcome"
DELIVERY_OUTCOME = "longcall.delivery.outcome"
RUN_ID = "longcall.run.id"
WORKFLOW_ID = "longcall.workflow.id"
RUN_STATUS = "longcall.run.status"
TASK_NAME = "longcall.task.name"
TASK_POSITION = "longcall.task.position"

_via: ContextVar[str | None] = ContextVar("longcall_completion_via", default=None)


@contextlib.contextmanager
def completion_via(via: str) -> Iterator[None]:
    """Completions made inside the block say they came through ``via`` (the server's API
    says ``api``, the CLI ``cli``); without it a completion says ``python``."""
    token = _via.set(via)
    try:
        yield
    finally:
        _via.reset(token)


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry refuses None (and logs a warning for it): leave those out."""
    return {k: v for k, v in values.items() if v is not None}


def job_attributes(job: Job) -> dict[str, Any]:
    return _attributes(
        {
            JOB_ID: job.job_id,
            TOOL_NAME: job.tool_name,
            APP_NAME: job.app_name,
            USER_ID: job.user_id,
            SESSION_ID: job.session_id,
            CALL_ID: job.call_id,
        }
    )


class Completion:
    """What a completion did, told to its span when the call returns."""

    __slots__ = ("job", "outcome")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.outcome: str | None = None

    def record(self, job: Job | None, outcome: str) -> None:
        self.job, self.outcome = job, outcome


class Telemetry:
    """The spans of one App: from ``tracer_provider``'s tracer, or the global provider's.

    Every method is a no-op when opentelemetry is not installed.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer: Tracer | None = None
        self._proxy: type | None = None
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:
            return
        self._context = context
        self._trace = trace
        self._propagate = propagate
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        # Until the global provider is set, its proxy's spans record nothing: skip them.
        self._proxy = None if tracer_provider is not None else trace.ProxyTracerProvider

    def _live(self) -> Tracer | None:
        """The tracer, or None while no provider would record its spans."""
        if self._proxy is not None and isinstance(self._trace.get_tracer_provider(), self._proxy):
            return None
        return self._tracer

    @property
    def enabled(self) -> bool:
        """Whether opentelemetry is installed (spans go nowhere without a provider)."""
        return self._tracer is not None

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        links: Sequence[Link] = (),
    ) -> Iterator[Span | None]:
        """A span, current inside the block; an exception is recorded and sets error status."""
        tracer = self._live()
        if tracer is None:
            yield None
            return
        with tracer.start_as_current_span(
            name, attributes=_attributes(attributes or {}), links=links
        ) as span:
            yield span

    def carry(self, func: Callable[P, T]) -> Callable[P, T]:
        """``func`` run in the current span's context, from whichever thread calls it (a
        thread pool does not carry context on its own)."""
        if self._live() is None:
            return func
        current = self._context.get_current()
        attach, detach = self._context.attach, self._context.detach

        def carried(*args: P.args, **kwargs: P.kwargs) -> T:
            token = attach(current)
            try:
                return func(*args, **kwargs)
            finally:
                detach(token)

        return carried

    # -- the trace context kept with a job ---------------------------------------------

    def trace_context(self) -> str | None:
        """The current span's context as the propagator writes it (a JSON object of its
        headers), or None outside a span."""
        if self._live() is None:
            return None
        if not self._trace.get_current_span().get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier)
        return json.dumps(carrier, separators=(",", ":"), sort_keys=True) if carrier else None

    def links(self, jobs: Sequence[Job]) -> list[Link]:
        """Links to the spans ``jobs`` were created in (those that kept a context)."""
        if self._live() is None:
            return []
        links, seen = [], set()
        for job in jobs:
            if not job.trace_context or job.trace_context in seen:
                continue
            seen.add(job.trace_context)
            try:
                carrier = json.loads(job.trace_context)
            except ValueError:
                continue
            context = self._propagate.extract(carrier)
            span_context = self._trace.get_current_span(context).get_span_context()
            if span_context.is_valid:
                links.append(self._trace.Link(span_context, {JOB_ID: job.job_id}))
        return links

    # -- the spans ---------------------------------------------------------------------

    @contextlib.contextmanager
    def completion(
        self, job_id: str, state: str, *, via: str | None = None
    ) -> Iterator[Completion]:
        """The ``longcall.complete`` span of a result reaching job ``job_id``.

        The span is made when the call returns, with the time it began: its link needs the
        job's stored trace context, which only the completion's own transaction reads.
        """
        done = Completion()
        if self._live() is None:
            yield done
            return
        start = time.time_ns()
        error: Exception | None = None
        try:
            yield done
        except Exception as exc:
            error = exc
            raise
        finally:
            self._completed(done, job_id, state, via or _via.get() or "python", start, error)

    def _completed(
        self,
        done: Completion,
        job_id: str,
        state: str,
        via: str,
        start: int,
        error: Exception | None,
    ) -> None:
        tracer = self._live()
        if tracer is None:
            return
        attributes = job_attributes(done.job) if done.job is not None else {JOB_ID: job_id}
        attributes[COMPLETION_VIA] = via
        attributes[COMPLETION_STATE] = state
        if done.outcome is not None:
            attributes[COMPLETION_OUTCOME] = done.outcome
        links = self.links([done.job]) if done.job is not None else []
        span = tracer.start_span(
            "longcall.complete", attributes=attributes, links=links, start_time=start
        )
        if error is not None:
            span.record_exception(error)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)))
        span.end()

    def deliver(self, jobs: Sequence[Job]) -> contextlib.AbstractContextManager[Span | None]:
        """The ``longcall.deliver`` span of one message to a session, linked to the spans
        its jobs were created in."""
        if self._live() is None:
            return contextlib.nullcontext()
        first = jobs[0]
        attributes = _attributes(
            {
                APP_NAME: first.app_name,
                USER_ID: first.user_id,
                SESSION_ID: first.session_id,
                JOB_IDS: [j.job_id for j in jobs],
            }
        )
        if len(jobs) == 1:
            attributes.update(job_attributes(first))
        return self.span("longcall.deliver", attributes, links=self.links(jobs))

    @staticmethod
    def set(span: Span | None, key: str, value: Any) -> None:
        """Set an attribute on ``span`` if there is one."""
        if span is not None and value is not None:
            span.set_attribute(key, value)

    def note(self, key: str, value: Any) -> None:
        """Set an attribute on the current span."""
        if value is not None and self._live() is not None:
            self._trace.get_current_span().set_attribute(key, value)

    def failed(self, error: Exception | str, span: Span | None = None) -> None:
        """Mark ``span`` (the current span by default) failed, for an error that was handled
        rather than raised through it."""
        if self._live() is None:
            return
        span = span or self._trace.get_current_span()
        if isinstance(error, Exception):
            span.record_exception(error)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)))
