"""``POST /v1/runs/{runId}/messages``: a message to a run's ``ctx.recv`` (``app.send``).

The run is found as the other run endpoints find it: a user's token reaches only that user's
runs (any other answers 404, as an unknown run does). A message is kept until the run
receives it; ``Idempotency-Key`` sends it once (per run): a repeat answers 200 with the
message the key stored, a new one 201. A run that has finished answers 409, a bad topic or
message 422; nothing is stored then.
"""

from __future__ import annotations

from typing import Annotated, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longcall.app import App
from longcall.errors import InvalidValue, RunStateError
from longcall.server.api.operation import Answer, Operation, header
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
)
