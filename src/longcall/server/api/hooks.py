"""``POST /v1/hooks/{source}``: completions and progress from outside, signed.

The order matters: the size is bounded before the body is read whole; the signature is checked
over the raw bytes before anything is parsed; only a verified delivery touches the store, and
its id is deduplicated in the same transaction as the change it carries. Every verified
delivery is answered 2xx (duplicates, late results and unknown jobs too: Standard Webhooks
senders retry anything else for days), and never before the commit.

The body::

    {"jobId": "report:2026-Q3:EMEA", "type": "complete", "result": {...}}
    {"jobId": "...", "type": "fail", "error": "quota exceeded"}
    {"jobId": "...", "type": "cancel", "reason": "no longer needed"}
    {"jobId": "...", "type": "progress", "progress": {"percent": 50}, "notifyModel": true}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.errors import StoreError, WebhookError
from longcall.server.api.models import HookAnswer
from longcall.server.api.operation import Answer, Operation, header
from longcall.server.api.requests import read_body, reply
from longcall.server.checks import bounded, nul_in_body, webhook_headers
from longcall.server.errors import error
from longcall.webhooks import verify

KINDS = ("complete", "fail", "cancel", "progress")


class _Base(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)

    job_id: Annotated[str, bounded("job_id", alias="jobId")]


class Complete(_Base):
    type: Literal["complete"]
    result: Any = None


class Fail(_Base):
    type: Literal["fail"]
    error: str | dict[str, Any]


class Cancel(_Base):
    type: Literal["cancel"]
    reason: str | None = None


class Progress(_Base):
    type: Literal["progress"]
    progress: Any
    notify_model: Annotated[bool, pydantic.Field(alias="notifyModel")] = False


Delivery = Annotated[Complete | Fail | Cancel | Progress, pydantic.Field(discriminator="type")]
_DELIVERY: pydantic.TypeAdapter[Complete | Fail | Cancel | Progress] = pydantic.TypeAdapter(
    Delivery
)


def _payload(delivery: Complete | Fail | Cancel | Progress) -> tuple[str, Any, bool]:
    if isinstance(delivery, Complete):
        return "complete", delivery.result, False
    if isinstance(delivery, Fail):
        body = delivery.error if isinstance(delivery.error, dict) else {"error": delivery.error}
        return "fail", body, False
    if isinstance(delivery, Cancel):
        return "cancel", {"message": delivery.reason or "The job was cancelled."}, False
    return "progress", delivery.progress, delivery.notify_model


async def receive(request: Request) -> Response:
    app: App = request.app.state.longcall
    settings = request.app.state.settings
    source = request.path_params["source"]
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return error(
            415, "unsupported_media_type", "send the delivery as application/json", "content-type"
        )
    body = await read_body(request, settings.max_body)
    if isinstance(body, Response):
        return body
    headers = webhook_headers(request.headers)  # before the store is asked anything
    if isinstance(headers, Response):
        return headers
    try:
        secrets = [s.secret for s in await app.in_thread(app.access.webhook_secrets, source)]
    except StoreError as exc:
        return error(503, "store_unavailable", f"the store cannot be read: {exc}")
    if not secrets:
        return error(401, "webhook_unauthorized", f"no secret is configured for {source!r}")
    request.state.webhook_source = source  # a configured one: metrics may name it
    try:
        message = verify(
            body,
            headers,
            secrets,
            tolerance=settings.tolerance,
            now=app.clock.now(),
            max_bytes=settings.max_body,
        )
    except WebhookError as exc:
        return error(exc.http_status, exc.code, str(exc))
    refused = nul_in_body(message.payload)
    if refused is not None:
        return refused
    try:
        delivery = _DELIVERY.validate_python(message.payload)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        path = [str(p) for p in first["loc"]]
        if path and path[0] in KINDS:  # the union's tag, not a field of the body
            path = path[1:]
        if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
            path = ["type"]
        return error(422, "invalid_delivery", first["msg"], ".".join(path) or None)
    kind, payload, notify = _payload(delivery)
    try:
        ingested = await app.ingest_async(
            source=source,
            delivery_id=message.webhook_id,
            job_id=delivery.job_id,
            kind=kind,
            payload=payload,
            notify_model=notify,
        )
    except StoreError as exc:
        return error(503, "store_unavailable", f"the delivery was not stored: {exc}")
    request.state.webhook_outcome = ingested.outcome
    status = 202 if ingested.outcome == "early" else 200
    answer = HookAnswer.model_validate({"outcome": ingested.outcome, "jobId": delivery.job_id})
    return reply(answer, status_code=status)


RECEIVE = Operation(
    "POST",
    "/v1/hooks/{source}",
    receive,
    tag="webhooks",
    summary="A signed delivery from outside (Standard Webhooks).",
    description="Signed with webhook-id, webhook-timestamp and webhook-signature headers. "
    "Every verified delivery is answered 2xx: duplicates, late results and unknown jobs too. "
    "A result at or after the job's deadline is `unchanged`: recorded as late, the job expired.",
    params=(
        header(
            "webhook-id",
            "The sender's id for the event (UTF-8); the signature and timestamp headers go "
            "beside it.",
            "webhook_id",
        ),
    ),
    body=Delivery,
    answers={
        200: Answer("Recorded (see `outcome`).", HookAnswer),
        202: Answer("Kept for a job not created yet.", HookAnswer),
    },
    refusals=(400, 401, 413, 415, 422, 503),
    auth=False,
)
"""Counted by the server's metrics: the app wraps its endpoint (``Metrics.counted``)."""
