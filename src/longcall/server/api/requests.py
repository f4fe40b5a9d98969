"""What every API handler shares: the token check, reading a JSON body into its model, and
answering with a shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import pydantic
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longcall.app import App
from longcall.errors import JobNotFound, StoreError, WebhookError
from longcall.server.auth import Principal, authenticate
from longcall.server.checks import nul_in_body
from longcall.server.errors import error
from longcall.shapes import Shape
from longcall.webhooks import parse_json

M = TypeVar("M", bound=pydantic.BaseModel)
Handler = Callable[[Request, App, Principal], Awaitable[Response]]

MAX_BODY = 1024 * 1024  # bytes in a request body


class Body(pydantic.BaseModel):
    """A request body: unknown fields are refused; fields go by their API (camelCase) name."""

    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)


def reply(shape: Shape, status_code: int = 200) -> JSONResponse:
    """An answer whose JSON body is ``shape``."""
    return JSONResponse(shape.dumped(), status_code=status_code)


def whole_number(text: str) -> bool:
    """ASCII digits only, and few of them: ``str.isdigit`` also takes "²", which int() refuses."""
    return text.isascii() and text.isdigit() and len(text) <= 18


async def read_body(request: Request, limit: int) -> bytes | Response:
    """The body, or a 413 answer as soon as it is known to be over ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            return error(400, "bad_content_length", "Content-Length is not a number")
        if int(declared) > limit:
            return error(413, "too_large", f"the body is over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return error(413, "too_large", f"the body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def body_of(request: Request, model: type[M]) -> M | Response:
    """The request's JSON body as ``model``, or the 4xx answer that says what is wrong."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return error(415, "unsupported_media_type", "send JSON (application/json)", "content-type")
    raw = await read_body(request, request.app.state.settings.max_body)
    if isinstance(raw, Response):
        return raw
    try:
        data = parse_json(raw) if raw else {}
    except WebhookError as exc:
        return error(400, "bad_request", str(exc))
    refused = nul_in_body(data)
    if refused is not None:
        return refused
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        return error(422, "invalid_body", first["msg"], field)


def authorized(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Answer 401 without a valid token, 503 when the store fails, else run ``handler``."""

    async def endpoint(request: Request) -> Response:
        who = await authenticate(request)
        if isinstance(who, Response):
            return who
        try:
            return await handler(request, request.app.state.longcall, who)
        except JobNotFound as exc:
            return error(404, "job_not_found", str(exc), "jobId")
        except StoreError as exc:
            return error(503, "store_unavailable", f"the store could not answer: {exc}")

    return endpoint
