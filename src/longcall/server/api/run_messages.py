"""``POST /v1/runs/{runId}/messages``: a message to a run's ``ctx.recv`` (``app.send``);
``GET /v1/runs/{runId}/values/{key}``: a value the run published (``app.get_event``).

The run is found as the other run endpoints find it: a user's token reaches only that user's
runs (any other answers 404, as an unknown run does). A message is kept until the run
receives it; ``Idempotency-Key`` sends it once (per run): a repeat answers 200 with the
message the key stored, a new one 201. A run that has finished answers 409, a bad topic or
message 422; nothing is stored then. A value read may wait up to 30 s for the run to
publish it (``?wait=``); the wait holds no thread, only this request.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longcall.app import App
from longcall.core.jobs import parse_duration
from longcall.errors import InvalidValue, RunStateError
from longcall.server.api.operation import Answer, Operation, header, query
from longcall.server.api.requests import Body, body_of
from longcall.server.api.runs import _authorized, visible_run
from longcall.server.auth import Principal
from longcall.server.checks import bounded
from longcall.server.errors import error
from longcall.shapes import Shape


class SendMessage(Body):
    topic: Annotated[str, bounded("topic")]
    message: Any = None


class SentMessage(Shape):
    """A message kept for a run: its number among the run's messages, and whether this
    request stored it (false: its Idempotency-Key had)."""

    run_id: str
    topic: str
    seq: int
    created: bool


async def send(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    body = await body_of(request, SendMessage)
    if isinstance(body, Response):
        return body
    key = request.headers.get("idempotency-key")
    try:
        sent = await app.in_thread(
            app.send, run.run_id, body.topic, body.message, idempotency_key=key
        )
    except RunStateError as exc:
        return error(409, "run_finished", str(exc), "runId")
    except InvalidValue as exc:
        field = "Idempotency-Key" if exc.field == "Idempotency-Key" else exc.field
        return error(422, "invalid_body", str(exc), field)
    shape = SentMessage(run_id=sent.run_id, topic=sent.topic, seq=sent.seq, created=sent.created)
    return JSONResponse(shape.dumped(), status_code=201 if sent.created else 200)


class PublishedValue(Shape):
    """The latest value the run published under ``key`` (``ctx.set_event``); ``found`` is
    false (and ``value`` null) when it has published none by the end of the wait."""

    run_id: str
    key: str
    found: bool
    value: Any = None


WAIT_MAX = 30.0
"""Seconds a value read may wait for its first value: a client wanting longer asks again."""


async def read_value(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    key = request.path_params["event_key"]
    wait = _seconds(request.query_params.get("wait", "0"))
    if not 0 <= wait <= WAIT_MAX:
        message = f"wait is seconds (or a duration such as 10s) from 0 to {WAIT_MAX:g}"
        return error(422, "invalid_query", message, "wait")
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        found, value = await app.in_thread(app.monitor.run_value, run.run_id, key)
        left = deadline - time.monotonic()
        if found or left <= 0:
            break
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)
    return JSONResponse(
        PublishedValue(run_id=run.run_id, key=key, found=found, value=value).dumped()
    )


def _seconds(text: str) -> float:
    """``"2.5"`` or ``"10s"`` as seconds; -1 for anything else (so it is refused)."""
    try:
        return parse_duration(float(text))
    except ValueError:
        pass
    try:
        return parse_duration(text)
    except ValueError:
        return -1.0


OPERATIONS = (
    Operation(
        "POST",
        "/v1/runs/{run_id:path}/messages",
        _authorized(send),
        tag="runs",
        summary="Send a message to the run's ctx.recv(topic).",
        description="Kept until the run receives it, in the order sent per topic; a run "
        "waiting in recv of this topic wakes. With an Idempotency-Key, sent once per run.",
        params=(
            header("Idempotency-Key", "Send once: a repeat stores nothing.", "idempotency_key"),
        ),
        body=SendMessage,
        answers={
            201: Answer("Kept for the run.", SentMessage),
            200: Answer("The message this Idempotency-Key sent before.", SentMessage),
        },
        refusals=(400, 401, 404, 409, 413, 415, 422, 503),
        reasons={
            404: "No such run, or not one the caller may see.",
            409: "The run has finished: it receives no more messages.",
            422: "The topic, message or Idempotency-Key is wrong; `field` names it.",
        },
    ),
    Operation(
        "GET",
        "/v1/runs/{run_id:path}/values/{event_key}",
        _authorized(read_value),
        tag="runs",
        summary="Read a value the run published with ctx.set_event(key).",
        description="The latest value under the key. With `wait`, a key not published yet is "
        "waited for, up to 30 s; `found` says whether there was one.",
        params=(
            query(
                "wait",
                "Seconds (or a duration such as 10s) to wait for a first value; at most 30.",
            ),
        ),
        answers={200: Answer("The value, or found false.", PublishedValue)},
        refusals=(400, 401, 404, 422, 503),
        reasons={
            404: "No such run, or not one the caller may see.",
            422: "The key or wait is wrong; `field` names it.",
        },
    ),
)
