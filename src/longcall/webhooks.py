"""Standard Webhooks: verify signed completions strictly, and sign test deliveries.

::

    from longcall.webhooks import WebhookError, verify

    try:
        message = verify(body, request.headers, secrets, now=clock.now())
    except WebhookError as exc:
        return Response(status_code=exc.http_status, content=exc.code)
    # message.webhook_id is the sender's idempotency key; message.payload the parsed JSON

:func:`verify` refuses a delivery with :class:`WebhookTooLarge` (413) before anything else,
:class:`WebhookUnauthorized` (401) until the headers, timestamp window and signature all
check out, and only then parses the body, refusing it with :class:`WebhookBadRequest` (400).
A misconfigured secret raises :class:`~longcall.errors.ConfigError`, a server error rather
than a refusal. Messages say what was wrong and never contain a secret.

Why this does not call ``standardwebhooks.Webhook.verify``: it decodes the body as UTF-8
before checking the signature (so an unsigned non-UTF-8 body could not be told from a signed
one), reads the system clock with a fixed five-minute window, accepts float timestamps, and
raises ``ValueError`` on a malformed signature header. Here the HMAC (the library's
``hmac_data``) covers the raw body bytes, which is what the scheme signs and what the library
signs for every UTF-8 body, so deliveries interoperate both ways.

Importing this module needs ``standardwebhooks`` (``pip install 'longcall[server]'``);
importing ``longcall`` alone never imports it.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, NoReturn

try:
    from standardwebhooks.webhooks import hmac_data
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "longcall.webhooks needs standardwebhooks; install it with: pip install 'longcall[server]'"
    ) from exc

from longcall.core.webhook_secrets import (
    MIN_SECRET_BYTES,
    SECRET_PREFIX,
    check_secret,
    decode_secret,
    new_secret,
)
from longcall.errors import (
    ConfigError,
    WebhookBadRequest,
    WebhookError,
    WebhookTooLarge,
    WebhookUnauthorized,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TOLERANCE",
    "MAX_DEPTH",
    "MIN_SECRET_BYTES",
    "SECRET_PREFIX",
    "SignedMessage",
    "WebhookBadRequest",
    "WebhookError",
    "WebhookTooLarge",
    "WebhookUnauthorized",
    "check_secret",
    "new_secret",
    "sign",
    "verify",
]

DEFAULT_MAX_BYTES = 1 << 20
"""Largest body :func:`verify` accepts by default (1 MiB)."""
DEFAULT_TOLERANCE = 300.0
"""Seconds a delivery's timestamp may lie before or after now (the spec's five minutes)."""
MAX_DEPTH = 64
"""Deepest nesting of JSON arrays and objects :func:`verify` parses."""

_ID, _TIMESTAMP, _SIGNATURE = "webhook-id", "webhook-timestamp", "webhook-signature"
# Plain ASCII digits without leading zeros, so the text signed is the number itself: int()
# would also take "+17", " 17", "1_7" and Arabic-Indic digits; the library even takes "17.5".
_INTEGER = re.compile(r"0|[1-9][0-9]{0,17}")
# Everything except brackets outside strings. The string branch matches from every quote
# (an unterminated string runs to the end), so the scan stays linear on hostile input.
_NOT_STRUCTURE = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[^"\[\]{}]++', re.DOTALL)
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


@dataclass(frozen=True, slots=True)
class SignedMessage:
    """A delivery whose signature, timestamp and body all checked out."""

    webhook_id: str
    """The sender's id for the event, the same on every retry: an idempotency key."""
    timestamp: int
    """When this attempt was sent, in seconds since the epoch."""
    payload: Any
    """The body parsed as JSON."""


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secrets: Sequence[str],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SignedMessage:
    """Check a Standard Webhooks delivery and parse its JSON body.

    ``headers`` are matched case-insensitively (``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``); a header given twice with different values is refused.
    ``secrets`` are every ``whsec_`` secret currently valid: during a rotation list the old
    and the new, and a signature made with any one of them is accepted. The timestamp must
    be an integer within ``tolerance`` seconds of ``now`` (default: the system clock), on
    either side. Pure: no I/O, nothing remembered, so a replay inside the window verifies
    again; deduplicate on ``webhook_id``.

    Raises, in the order checked: :class:`~longcall.errors.ConfigError` for a secret that
    cannot work or an empty list; :class:`WebhookTooLarge` for a body over ``max_bytes``;
    :class:`WebhookUnauthorized` for a missing, duplicated or malformed header, a timestamp
    outside the window, or no matching signature; :class:`WebhookBadRequest` for a signed
    body that is not UTF-8, not JSON, or nested deeper than :data:`MAX_DEPTH`.
    """
    if isinstance(secrets, str):
        raise ConfigError("webhook secrets must be a list of secrets, not one string")
    keys = [decode_secret(s, f"webhook secret #{i + 1}") for i, s in enumerate(secrets)]
    if not keys:
        raise ConfigError("no webhook secret is configured; every delivery would be refused")
    if tolerance < 0:
        raise ConfigError(f"webhook tolerance must be at least 0 seconds, got {tolerance}")
    if len(body) > max_bytes:
        raise WebhookTooLarge(f"body is {len(body)} bytes; the limit is {max_bytes}")

    webhook_id, timestamp_text, signature_header = _read_headers(headers)
    timestamp = _check_timestamp(timestamp_text, tolerance, time.time() if now is None else now)
    expected = [hmac_data(key, f"{webhook_id}.{timestamp_text}.".encode() + body) for key in keys]
    offered = _read_signatures(signature_header)
    if not any(hmac.compare_digest(e, o) for e in expected for o in offered):
        raise WebhookUnauthorized("no webhook-signature matches any configured secret")
    return SignedMessage(webhook_id=webhook_id, timestamp=timestamp, payload=_parse(body))


def sign(
    body: bytes,
    secret: str,
    *,
    webhook_id: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The three Standard Webhooks headers that make ``body`` a delivery signed with ``secret``.

    ``webhook_id`` defaults to a fresh ``msg_<hex>`` and ``timestamp`` to now (whole
    seconds). The signature covers the raw bytes, so any body can be signed, including ones
    :func:`verify` will refuse after checking the signature. Raises
    :class:`~longcall.errors.ConfigError` for a secret :func:`check_secret` refuses and
    ``ValueError`` for an empty id or a negative timestamp.
    """
    key = decode_secret(secret, "webhook secret")
    webhook_id = f"msg_{uuid.uuid4().hex}" if webhook_id is None else webhook_id
    timestamp = int(time.time()) if timestamp is None else timestamp
    if not webhook_id:
        raise ValueError("webhook_id must not be empty")
    if timestamp < 0:
        raise ValueError(f"timestamp must be seconds since the epoch, got {timestamp}")
    signature = hmac_data(key, f"{webhook_id}.{timestamp}.".encode() + body)
    return {
        _ID: webhook_id,
        _TIMESTAMP: str(timestamp),
        _SIGNATURE: "v1," + base64.b64encode(signature).decode("ascii"),
    }


def _read_headers(headers: Mapping[str, str]) -> tuple[str, str, str]:
    found: dict[str, str] = {}
    # items(), not get(): a multi-valued header object (Starlette's) lists each value.
    for name, value in headers.items():
        key = name.lower()
        if key in (_ID, _TIMESTAMP, _SIGNATURE) and found.setdefault(key, value) != value:
            raise WebhookUnauthorized(f"header {key} is given twice with different values")
    missing = [name for name in (_ID, _TIMESTAMP, _SIGNATURE) if not found.get(name)]
    if missing:
        raise WebhookUnauthorized(f"missing or empty header: {', '.join(missing)}")
    return found[_ID], found[_TIMESTAMP], found[_SIGNATURE]


def _check_timestamp(text: str, tolerance: float, now: float) -> int:
    if not _INTEGER.fullmatch(text):
        raise WebhookUnauthorized(
            f"{_TIMESTAMP} must be whole seconds since the epoch, written as plain digits"
        )
    timestamp = int(text)
    if timestamp < now - tolerance:
        raise WebhookUnauthorized(
            f"{_TIMESTAMP} is {now - timestamp:.0f} s in the past, outside the {tolerance:g} s "
            "window (a replay, or the sender's clock is behind)"
        )
    if timestamp > now + tolerance:
        raise WebhookUnauthorized(
            f"{_TIMESTAMP} is {timestamp - now:.0f} s in the future, outside the {tolerance:g} s "
            "window (the sender's clock is ahead)"
        )
    return timestamp


def _read_signatures(header: str) -> list[bytes]:
    """The decoded ``v1`` signatures; entries of other versions (``v1a``) are skipped."""
    signatures = []
    for entry in header.split():
        version, comma, encoded = entry.partition(",")
        if not version or not comma:
            _malformed_signature()
        if version != "v1":
            continue
        try:
            signatures.append(base64.b64decode(encoded, validate=True))
        except ValueError:
            _malformed_signature()
    if not signatures:
        raise WebhookUnauthorized(f"{_SIGNATURE} holds no v1 signature")
    return signatures


def _malformed_signature() -> NoReturn:
    raise WebhookUnauthorized(
        f"malformed {_SIGNATURE}: expected space-separated '<version>,<base64>' entries"
    )


def parse_json(body: bytes) -> Any:
    """A request body as JSON with the limits every endpoint applies.

    Strict UTF-8, at most :data:`MAX_DEPTH` levels (checked without recursion), no NaN or
    Infinity, no text a store cannot keep. Raises :class:`WebhookBadRequest` (400).
    """
    return _parse(body)


def _parse(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WebhookBadRequest(f"body is not valid UTF-8 (at byte {exc.start})") from exc
    if _too_deep(text):
        raise WebhookBadRequest(f"body nests JSON arrays or objects deeper than {MAX_DEPTH}")
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:  # unreachable after _too_deep; kept as a second guard
        raise WebhookBadRequest(f"body nests JSON deeper than {MAX_DEPTH}") from exc
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise WebhookBadRequest(f"body is not valid JSON: {exc}") from exc
    # Valid JSON that no store can keep: PostgreSQL's jsonb refuses NUL characters, and a
    # lone surrogate (\ud800) has no UTF-8 form at all.
    if any("\x00" in text for text in _strings(payload)):
        raise WebhookBadRequest("body contains a NUL character (\\u0000), which cannot be stored")
    try:
        json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WebhookBadRequest("body contains a lone surrogate escape, not valid text") from exc
    return payload


def _strings(payload: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, keys included, without recursion."""
    pending = [payload]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            yield from value.keys()
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest deeper than :data:`MAX_DEPTH`, without recursion.

    On invalid JSON the count may differ from the parser's view only after the point where
    the parser fails, so it never lets the parser recurse past the limit.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_STRUCTURE.sub("", text)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")
