"""Talking to a run from outside: ``app.send`` a message to its ``ctx.recv``, and
``app.get_event`` a value its ``ctx.set_event`` published. Both work from any process."""

from __future__ import annotations

import time
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from longcall.core.ids import RULES
from longcall.core.jobs import parse_duration
from longcall.errors import InvalidValue
from longcall.runtime import Runtime
from longcall.store._run_messages import SentMessage

POLL = 0.05  # seconds between looks while get_event waits


def checked(rule: str, value: Any) -> str:
    """``value`` if it is a valid ``RULES[rule]`` string; else InvalidValue saying why."""
    label = RULES[rule].label
    if not isinstance(value, str):
        raise InvalidValue(label, f"is a string, not {type(value).__name__}")
    problem = RULES[rule].problem(value)
    if problem is not None:
        raise InvalidValue(label, problem.removeprefix(f"{label} "))
    return value


def send(
    runtime: Runtime,
    run_id: str,
    topic: str,
    message: Any,
    *,
    idempotency_key: str | None = None,
) -> SentMessage:
    """Keep ``message`` for the run's next ``ctx.recv(topic)``, waking it if it waits there.

    Exactly once per ``idempotency_key`` (per run); messages of one topic are received in the
    order sent. RunNotFound for an unknown run, RunStateError for one that has finished,
    InvalidValue for a bad topic, key or message; nothing is stored then.
    """
    checked("run_id", run_id)
    checked("topic", topic)
    if idempotency_key is not None:
        checked("idempotency_key", idempotency_key)
    try:
        data = to_jsonable_python(message)
    except PydanticSerializationError as exc:
        raise InvalidValue("message", f"is not JSON data: {exc}") from None
    return runtime.store.send_message(run_id, topic, data, idempotency_key=idempotency_key)


def get_event(runtime: Runtime, run_id: str, key: str, *, wait: float | str = 0) -> Any:
    """The latest value the run published under ``key``; if it has published none yet, wait
    up to ``wait`` for one (looking every 50 ms), then None. RunNotFound for an unknown run."""
    checked("run_id", run_id)
    checked("event_key", key)
    seconds = parse_duration(wait)
    store = runtime.store
    store.get_run(run_id)  # RunNotFound for a run that does not exist
    deadline = time.monotonic() + seconds
    while True:
        found, value = store.run_value(run_id, key)
        if found or time.monotonic() >= deadline:
            return value
        time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
