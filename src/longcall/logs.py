"""Structured log records: what a record is about, and one JSON object per line.

A log record about a job, a run or a session carries ``job_id``, ``run_id`` and
``session_id`` as attributes (``log.warning(..., extra=about(job))``), which a handler that
ships logs somewhere searchable keeps as fields. ``longcall --log-format json`` (or
``LONGCALL_LOG_FORMAT=json``) prints every record as one JSON object per line with
:class:`JsonFormatter`: the time, level, logger and message, those fields, the exception's
text, and the trace and span id when an OpenTelemetry span is current.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from longcall.core.jobs import Job, SessionKey

# The record attributes that say what a record is about, in the order JSON lines show them.
FIELDS = ("job_id", "run_id", "session_id")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def about(
    job: Job | None = None,
    *,
    job_id: str | None = None,
    run_id: str | None = None,
    session: SessionKey | None = None,
    session_id: str | None = None,
) -> dict[str, str]:
    """The ``extra=`` of a log call about ``job`` (its id and session), a run or a session;
    only the ids known are set."""
    if job is not None:
        job_id = job_id or job.job_id
        session_id = session_id or job.session_id
    if session is not None:
        session_id = session_id or session.session_id
    fields = {"job_id": job_id, "run_id": run_id, "session_id": session_id}
    return {k: v for k, v in fields.items() if v is not None}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the :data:`FIELDS` the record has, ``exception`` and ``stack`` when there
    are, and ``trace_id`` and ``span_id`` inside an OpenTelemetry span."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        data.update(_trace_ids())
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exception"] = record.exc_text
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def _trace_ids() -> dict[str, str]:
    # Only if something imported opentelemetry already: logging never imports it.
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def configure(level: int, log_format: str = "text") -> None:
    """Log to stderr at ``level``, as text or as JSON lines (``log_format``), as the
    ``longcall`` command does."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {log_format!r}")
    handler = logging.StreamHandler()
    json_lines = log_format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
