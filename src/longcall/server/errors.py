"""Every error answer has one shape: ``{"error": {"code", "message", "field"}}``."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from longcall.shapes import Shape


class ErrorDetail(Shape):
    code: str
    message: str
    field: str | None


class Error(Shape):
    """An error answer; ``field`` names the field, parameter or header at fault."""

    error: ErrorDetail


def error(status: int, code: str, message: str, field: str | None = None) -> JSONResponse:
    detail = ErrorDetail(code=code, message=message, field=field)
    return JSONResponse(Error(error=detail).dumped(), status_code=status)


def error_body(code: str, message: str) -> bytes:
    """The JSON of an error answer, for the middleware that write their answers as bytes."""
    detail = ErrorDetail(code=code, message=message, field=None)
    return json.dumps(Error(error=detail).dumped()).encode()
