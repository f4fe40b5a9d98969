"""Every error answer has one shape: ``{"error": {"code", "message", "field"}}``."""

from __future__ import annotations

from starlette.responses import JSONResponse


def error(status: int, code: str, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "field": field}}, status_code=status
    )
