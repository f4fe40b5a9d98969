"""Completions: a job's result, failure or cancel recorded, each in a ``longcall.complete``
span linked to the span that started the job (:mod:`longcall.telemetry`).

The :class:`~longcall.App`'s ``complete``, ``fail``, ``cancel`` and ``ingest`` (and their
``_async`` forms) come here; the store's conditional update decides what each one did.
"""

from __future__ import annotations

from typing import Any

from longcall.core.jobs import FinishOutcome, JobState
from longcall.runtime import Runtime
from longcall.store.base import INGEST_KINDS, Ingested


def outcome_word(outcome: FinishOutcome) -> str:
    """``applied``, ``late`` (the deadline answered instead) or ``unchanged`` (the job had
    finished already)."""
    if outcome.changed:
        return "applied"
    return "late" if outcome.late else "unchanged"


class Completions:
    """Records completions through the runtime's store, each in its span."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def finish(
        self, job_id: str, state: JobState, body: Any, *, request_cancel: bool = False
    ) -> FinishOutcome:
        """:meth:`Store.finish <longcall.store.Store.finish>` in a ``longcall.complete`` span."""
        runtime = self.runtime
        with runtime.telemetry.completion(job_id, state.value) as done:
            outcome = runtime.store.finish(job_id, state, body, request_cancel=request_cancel)
            done.record(outcome.job, outcome_word(outcome))
        return outcome

    async def finish_async(
        self, job_id: str, state: JobState, body: Any, *, request_cancel: bool = False
    ) -> FinishOutcome:
        runtime = self.runtime
        with runtime.telemetry.completion(job_id, state.value) as done:
            outcome = await runtime.in_thread(
                runtime.store.finish, job_id, state, body, request_cancel=request_cancel
            )
            done.record(outcome.job, outcome_word(outcome))
        return outcome

    def ingest(self, **delivery: Any) -> Ingested:
        """:meth:`Store.ingest <longcall.store.Store.ingest>` (keyword arguments as there); a
        result, failure or cancel in a ``longcall.complete`` span that says ``webhook``."""
        runtime = self.runtime
        state = INGEST_KINDS.get(delivery["kind"])
        if state is None:  # progress, or a kind the store refuses
            return runtime.store.ingest(**delivery)
        with runtime.telemetry.completion(delivery["job_id"], state.value, via="webhook") as done:
            ingested = runtime.store.ingest(**delivery)
            done.record(ingested.job, ingested.outcome)
        return ingested

    async def ingest_async(self, **delivery: Any) -> Ingested:
        runtime = self.runtime
        state = INGEST_KINDS.get(delivery["kind"])
        if state is None:
            return await runtime.in_thread(runtime.store.ingest, **delivery)
        with runtime.telemetry.completion(delivery["job_id"], state.value, via="webhook") as done:
            ingested = await runtime.in_thread(runtime.store.ingest, **delivery)
            done.record(ingested.job, ingested.outcome)
        return ingested
