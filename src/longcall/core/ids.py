"""What an identifier may be: a length bound and a character rule for each kind.

Two layers use these rules, for two reasons:

- The HTTP API (``longcall.server.checks``) checks every id in a path, a query, a header or a
  body against its :class:`IdRule` before any SQL runs, and publishes the same bounds in its
  OpenAPI document. Its bounds are in characters: what a client can count.
- The store (:func:`check_params`) refuses, before any SQL, a NUL anywhere in a string it is
  asked to keep or compare, and an id longer than its :data:`STORE_MAX_BYTES`. Those bounds are
  in UTF-8 bytes, because what must hold is PostgreSQL's: a btree index entry is at most about
  2,704 bytes, and an insert past it fails. With them every indexed combination stays under the
  limit, even when every character takes 4 bytes: the largest pairs are (session, call),
  (source, webhook-id) and (run, answer key), each at most 2 x 1,200 bytes.

The API's character bounds sit inside the store's byte bounds (4 bytes a character at most),
so a request the API lets through is never refused by the store for its size.

Job ids: a client picks at most :data:`JOB_KEY_MAX` (512) characters; a stored job id may be
:data:`JOB_ID_MAX` (529) characters, room for a ``@<16 hex>`` suffix (17 characters) that
namespaces a user's ids; paths and webhook bodies name stored ids, so they take up to 529.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from longcall.errors import InvalidValue

__all__ = [
    "JOB_ID_MAX",
    "JOB_KEY_MAX",
    "MAX_DEADLINE_SECONDS",
    "RULES",
    "STORE_MAX_BYTES",
    "IdRule",
    "check_params",
    "find_nul",
]

JOB_KEY_MAX = 512
"""Characters in a job id a client chooses (``jobId`` of ``POST /v1/jobs``)."""
JOB_ID_MAX = JOB_KEY_MAX + 17
"""Characters in a stored job id: a client's key plus a ``@<16 hex>`` user suffix."""
MAX_DEADLINE_SECONDS = 10 * 365 * 86400.0
"""A deadline further away than 10 years is a mistake, not a plan: refused."""

# C0 controls and DEL: never part of an id, and a NUL cannot even be stored by PostgreSQL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NO_CONTROL_PATTERN = r"^[^\u0000-\u001f\u007f]*$"
"""The character rule as an OpenAPI (ECMA) ``pattern``."""
NO_NUL_PATTERN = r"^[^\u0000]*$"
"""The rule for free text (reasons, messages, search text): anything but NUL."""


@dataclass(frozen=True, slots=True)
class IdRule:
    """What one kind of identifier may be: 1 to ``max_length`` characters, no control
    characters (or, for free text, no NUL), and ``pattern`` (a regular expression the whole
    value must match) when given."""

    label: str
    max_length: int
    min_length: int = 1
    free_text: bool = False
    pattern: str | None = None

    def problem(self, value: str) -> str | None:
        """What is wrong with ``value``, or None; a NUL is always named first."""
        if "\x00" in value:
            return f"{self.label} has a NUL character"
        if len(value) < self.min_length:
            return f"{self.label} is empty" if self.min_length == 1 else self._range()
        if len(value) > self.max_length:
            return f"{self.label} is at most {self.max_length} characters, not {len(value)}"
        if not self.free_text and _CONTROL.search(value):
            return f"{self.label} has a control character"
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            return f"{self.label} is not in the expected form"
        return None

    def _range(self) -> str:
        return f"it has {self.min_length} to {self.max_length} characters"

    def json_schema(self) -> dict[str, Any]:
        """The rule as an OpenAPI string schema."""
        schema: dict[str, Any] = {
            "type": "string",
            "minLength": self.min_length,
            "maxLength": self.max_length,
            "pattern": self.pattern or (NO_NUL_PATTERN if self.free_text else NO_CONTROL_PATTERN),
        }
        return schema


_ID = 200  # characters in most ids: session, call, tool, user, app, cron, workflow
RULES: dict[str, IdRule] = {
    "job_key": IdRule("jobId", JOB_KEY_MAX),
    "job_id": IdRule("jobId", JOB_ID_MAX),
    "session_id": IdRule("sessionId", _ID),
    "call_id": IdRule("callId", _ID),
    "invocation_id": IdRule("invocationId", _ID),
    "app_name": IdRule("appName", _ID),
    "user_id": IdRule("userId", _ID),
    "tool_name": IdRule("toolName", _ID),
    "run_id": IdRule("runId", _ID),
    "cron_id": IdRule("cronId", _ID),
    "cron_name": IdRule("name", _ID),
    "workflow_id": IdRule("workflowId", _ID),
    "cron_expression": IdRule("cronExpression", _ID),
    "timezone": IdRule("timezone", 100),
    "source": IdRule("source", 100),
    "webhook_id": IdRule("webhook-id", 256),
    "idempotency_key": IdRule("Idempotency-Key", 255),
    "topic": IdRule("topic", 200),  # of a message to a run (app.send, ctx.recv)
    "event_key": IdRule("key", 200),  # of a value a run publishes (ctx.set_event)
    # A page cursor is base64url of a JSON [time, id]; an id of 529 characters, each escaped
    # as a 12-character surrogate pair, stays under this.
    "cursor": IdRule("cursor", 9000, min_length=0, pattern=r"[A-Za-z0-9_=-]*"),
    "seq": IdRule("after", 18, pattern=r"[0-9]+"),
    "search": IdRule("q", 200, min_length=0, free_text=True),
    "text": IdRule("text", 1 << 20, min_length=0, free_text=True),
    "token": IdRule("token", 1024, min_length=0, free_text=True),
}
"""Every kind of identifier the API takes, by name."""

STORE_MAX_BYTES: Mapping[str, int] = {
    "job_id": 2200,
    "session_id": 1200,
    "call_id": 1200,
    "invocation_id": 1200,
    "app_name": 1200,
    "user_id": 1200,
    "tool_name": 1200,
    "run_id": 1200,
    "end_run_id": 1200,
    "cron_id": 1200,
    "workflow_id": 1200,
    "source": 400,
    "delivery_id": 1200,
    "key": 1200,
    "topic": 1200,
    "idempotency_key": 2600,
    "concurrency_key": 1200,
    "worker_id": 1200,
    "token_id": 1200,
}
"""UTF-8 bytes the store keeps at most in each indexed id, by its query parameter's name."""


def check_params(params: Mapping[str, Any]) -> None:
    """Refuse, with :class:`~longcall.errors.InvalidValue`, parameters no store should get:
    a NUL in any string, or an indexed id over its :data:`STORE_MAX_BYTES`. Runs before the
    SQL does, so a value PostgreSQL would refuse fails at once, the same way on SQLite."""
    for name, value in params.items():
        if not isinstance(value, str):
            continue
        if "\x00" in value:
            raise InvalidValue(name, "has a NUL character, which no store keeps", nul=True)
        limit = STORE_MAX_BYTES.get(name)
        # Cheap first: a value of n characters takes at most 4n bytes.
        if limit is not None and len(value) * 4 > limit:
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise InvalidValue(name, f"is {size} bytes; the store keeps at most {limit}")


def find_nul(value: Any, path: str = "") -> str | None:
    """The path (``a.b.0``) to the first string (or key) in a parsed JSON value that holds
    a NUL, ``""`` for the value itself; None when there is none."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, dict):
            for key, inner in item.items():
                at = f"{where}.{key}" if where else str(key)
                if "\x00" in str(key):
                    return at
                stack.append((at, inner))
        elif isinstance(item, list):
            stack.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(item))
    return None
