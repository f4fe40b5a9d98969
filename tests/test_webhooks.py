"""longcall.webhooks: strict Standard Webhooks verification, signing and secrets (pure, no I/O)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from longcall.errors import ConfigError, LongcallError
from longcall.webhooks import (
    MAX_DEPTH,
    SignedMessage,
    WebhookBadRequest,
    WebhookError,
    WebhookTooLarge,
    WebhookUnauthorized,
    check_secret,
    new_secret,
    sign,
    verify,
)

NOW = 1_790_000_000
SECRET_KEY = bytes(range(1, 33))
SECRET = "whsec_" + base64.b64encode(SECRET_KEY).decode()
OTHER = "whsec_" + base64.b64encode(bytes(range(101, 133))).decode()
BODY = b'{"jobId": "report:2026-Q3:EMEA", "result": {"rowCount": 48213}}'


def delivery(body: bytes = BODY, secret: str = SECRET, **kw: Any) -> dict[str, str]:
    """Headers signing ``body`` at NOW unless told otherwise."""
    kw.setdefault("webhook_id", "msg_1")
    kw.setdefault("timestamp", NOW)
    return sign(body, secret, **kw)


def refused(
    error: type[WebhookError],
    body: bytes,
    headers: dict[str, str],
    secrets: list[str] | None = None,
    **kw: Any,
) -> WebhookError:
    """Run verify, expect ``error``, and check the message does not leak a secret."""
    with pytest.raises(error) as info:
        verify(body, headers, [SECRET] if secrets is None else secrets, now=NOW, **kw)
    for secret in (SECRET, OTHER):
        assert secret.removeprefix("whsec_")[:12] not in str(info.value)
    return info.value


def test_valid_delivery_verifies_and_parses() -> None:
    """A delivery signed with the secret verifies and returns its id, timestamp and JSON."""
    message = verify(BODY, delivery(), [SECRET], now=NOW)
    assert message == SignedMessage(
        webhook_id="msg_1",
        timestamp=NOW,
        payload={"jobId": "report:2026-Q3:EMEA", "result": {"rowCount": 48213}},
    )


def test_header_names_are_case_insensitive() -> None:
    """Header names match whatever their case."""
    headers = {name.title(): value for name, value in delivery().items()}
    assert "Webhook-Signature" in headers
    assert verify(BODY, headers, [SECRET], now=NOW).webhook_id == "msg_1"


def test_library_signed_delivery_verifies() -> None:
    """A delivery signed by standardwebhooks' own Webhook.sign verifies here."""
    stamp = datetime.fromtimestamp(NOW, tz=UTC)
    signature = Webhook(SECRET).sign("msg_lib", stamp, BODY.decode())
    headers = {
        "webhook-id": "msg_lib",
        "webhook-timestamp": str(NOW),
        "webhook-signature": signature,
    }
    assert verify(BODY, headers, [SECRET], now=NOW).webhook_id == "msg_lib"


def test_signed_here_verifies_with_library() -> None:
    """Headers from sign() pass standardwebhooks' own Webhook.verify."""
    headers = sign(BODY, SECRET)
    assert Webhook(SECRET).verify(BODY, headers) == json.loads(BODY)


def test_forged_signature_is_refused() -> None:
    """A signature over a different body is refused with 401."""
    headers = delivery(b'{"result": "forged"}')
    error = refused(WebhookUnauthorized, BODY, headers)
    assert error.http_status == 401 and error.code == "webhook_unauthorized"
    assert "no webhook-signature matches" in str(error)


def test_tampered_id_or_timestamp_is_refused() -> None:
    """The id and the timestamp are signed too: changing either breaks the signature."""
    refused(WebhookUnauthorized, BODY, {**delivery(), "webhook-id": "msg_2"})
    refused(WebhookUnauthorized, BODY, {**delivery(), "webhook-timestamp": str(NOW + 1)})


@pytest.mark.parametrize("header", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_header_is_refused(header: str) -> None:
    """Each of the three headers is required; the message names the missing one."""
    headers = delivery()
    del headers[header]
    assert header in str(refused(WebhookUnauthorized, BODY, headers))
    assert header in str(refused(WebhookUnauthorized, BODY, {**headers, header: ""}))


def test_conflicting_duplicate_header_is_refused() -> None:
    """The same header twice (differing in case) with different values is refused."""
    headers = {**delivery(), "Webhook-Id": "msg_other"}
    assert "twice" in str(refused(WebhookUnauthorized, BODY, headers))


def test_signature_with_another_secret_is_refused() -> None:
    """A correctly formed signature made with a secret not configured is refused."""
    refused(WebhookUnauthorized, BODY, delivery(secret=OTHER))


def test_rotated_secrets_accept_either_until_removed() -> None:
    """With old and new secrets configured both verify; with the old removed, it is refused."""
    both = [OTHER, SECRET]
    assert verify(BODY, delivery(secret=SECRET), both, now=NOW).payload == json.loads(BODY)
    assert verify(BODY, delivery(secret=OTHER), both, now=NOW).payload == json.loads(BODY)
    refused(WebhookUnauthorized, BODY, delivery(secret=SECRET), secrets=[OTHER])


def test_sender_signing_with_old_and_new_secret_verifies() -> None:
    """A header listing several signatures (the sender's rotation) verifies if any one matches."""
    old, new = delivery(secret=OTHER), delivery(secret=SECRET)
    both = f"{old['webhook-signature']} v1a,c2lnbmVk {new['webhook-signature']}"
    headers = {**new, "webhook-signature": both}
    assert verify(BODY, headers, [SECRET], now=NOW).webhook_id == "msg_1"


@pytest.mark.parametrize(
    ("offset", "words"), [(-301, "in the past"), (301, "in the future"), (-86_400, "in the past")]
)
def test_timestamp_outside_window_is_refused(offset: int, words: str) -> None:
    """A replay older than the tolerance, or a timestamp too far ahead, is refused with 401."""
    headers = delivery(timestamp=NOW + offset)
    assert words in str(refused(WebhookUnauthorized, BODY, headers))


@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
def test_timestamp_inside_window_is_accepted(offset: int) -> None:
    """Timestamps up to the tolerance either side of now verify, edges included."""
    assert (
        verify(BODY, delivery(timestamp=NOW + offset), [SECRET], now=NOW).timestamp == NOW + offset
    )


def test_tolerance_and_clock_are_configurable() -> None:
    """The window follows the given tolerance and the given now, not the system clock."""
    headers = delivery(timestamp=NOW - 3_000)
    assert verify(BODY, headers, [SECRET], now=NOW, tolerance=3_600).timestamp == NOW - 3_000
    refused(WebhookUnauthorized, BODY, headers, tolerance=2_999)
    refused(WebhookUnauthorized, BODY, delivery(timestamp=NOW - 1), tolerance=0)
    assert verify(BODY, delivery(timestamp=NOW), [SECRET], now=NOW, tolerance=0).timestamp == NOW


@pytest.mark.parametrize(
    "stamp", [f"{NOW}.0", f"{NOW}.5", "1.79e9", f"+{NOW}", f" {NOW}", f"0{NOW}", "1_790_000_000"]
)
def test_non_integer_timestamp_is_refused(stamp: str) -> None:
    """A float or otherwise non-plain-integer timestamp is refused even when correctly signed."""
    # Signed over the odd text itself, so only its format can be the reason for refusing it.
    mac = hmac.new(SECRET_KEY, f"msg_1.{stamp}.".encode() + BODY, hashlib.sha256).digest()
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }
    assert "plain digits" in str(refused(WebhookUnauthorized, BODY, headers))


def test_arabic_indic_digits_timestamp_is_refused() -> None:
    """Non-ASCII digits that int() would accept are refused."""
    stamp = "".join(chr(0x660 + int(digit)) for digit in str(NOW))  # Arabic-Indic digits
    assert int(stamp) == NOW
    headers = {**delivery(), "webhook-timestamp": stamp}
    assert "plain digits" in str(refused(WebhookUnauthorized, BODY, headers))


@pytest.mark.parametrize(
    "header",
    ["garbage", "v1", ",c2ln", "v1,not base64!", "v1,abc,def", "v1,c2lnbmVk=== x", "v1a,c2ln"],
)
def test_malformed_signature_header_is_refused(header: str) -> None:
    """A malformed signature header is a 401, not an uncaught ValueError."""
    headers = {**delivery(), "webhook-signature": header}
    error = refused(WebhookUnauthorized, BODY, headers)
    assert "webhook-signature" in str(error)


def test_library_refuses_a_malformed_signature_one_way_or_another() -> None:
    """The quirk wrapped here: standardwebhooks raised ValueError on such a header before its
    newer releases, which raise WebhookVerificationError; the wrapper answers 401 for both."""
    headers = {**sign(BODY, SECRET), "webhook-signature": "garbage"}
    with pytest.raises((ValueError, WebhookVerificationError)):
        Webhook(SECRET).verify(BODY, headers)


def test_signed_invalid_utf8_body_is_bad_request() -> None:
    """A correctly signed body that is not UTF-8 is a 400."""
    body = b'{"result": "\xff\xfe"}'
    error = refused(WebhookBadRequest, body, delivery(body))
    assert error.http_status == 400 and error.code == "webhook_bad_request"
    assert "UTF-8" in str(error)


def test_unsigned_invalid_utf8_body_is_unauthorized() -> None:
    """A non-UTF-8 body with a bad signature is a 401: the signature is checked first."""
    body = b'{"result": "\xff\xfe"}'
    refused(WebhookUnauthorized, body, delivery(b'{"result": "ok"}'))


@pytest.mark.parametrize(
    "body", [b"", b"not json", b'{"a": 1', b'{"a": NaN}', b"[Infinity]", b"7" * 5_000]
)
def test_signed_non_json_body_is_bad_request(body: bytes) -> None:
    """A signed body that is not strict JSON (NaN, Infinity, huge integers too) is a 400."""
    assert "not valid JSON" in str(refused(WebhookBadRequest, body, delivery(body)))


def test_deep_json_is_refused_fast() -> None:
    """5,000-deep JSON is refused with 400 in milliseconds, never a RecursionError."""
    for body in (b"[" * 5_000 + b"]" * 5_000, b'{"a":' * 5_000 + b"1" + b"}" * 5_000, b"[" * 5_000):
        headers = delivery(body)
        started = time.perf_counter()
        error = refused(WebhookBadRequest, body, headers)
        assert time.perf_counter() - started < 0.1
        assert "deeper than 64" in str(error)


def test_depth_limit_is_exact() -> None:
    """JSON nested exactly MAX_DEPTH deep parses; one level more is refused."""
    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert verify(at_limit, delivery(at_limit), [SECRET], now=NOW).payload is not None
    over = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    refused(WebhookBadRequest, over, delivery(over))


def test_brackets_inside_strings_do_not_count() -> None:
    """Brackets, quotes and backslashes inside strings do not count towards the depth."""
    payload = {"a": "[" * 500, "b": '\\"{{{{' * 100, "c": ["\\", "\\\\[[[[" * 50]}
    body = json.dumps(payload).encode()
    assert verify(body, delivery(body), [SECRET], now=NOW).payload == payload


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab:,é'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_any_shallow_json_round_trips(value: Any) -> None:
    """Any JSON within the depth limit, however its strings look, verifies and parses back."""
    body = json.dumps(value, ensure_ascii=False).encode()
    assert verify(body, delivery(body), [SECRET], now=NOW).payload == value


def test_body_over_limit_is_too_large() -> None:
    """A 5 MB body is refused with 413 before its signature is even checked."""
    body = b'{"a": "' + b"x" * 5_000_000 + b'"}'
    error = refused(WebhookTooLarge, body, {})
    assert error.http_status == 413 and error.code == "webhook_too_large"
    refused(WebhookTooLarge, body, delivery(body))
    small = b"[1, 2, 3]"
    refused(WebhookTooLarge, small, delivery(small), max_bytes=8)
    assert verify(small, delivery(small), [SECRET], now=NOW, max_bytes=9).payload == [1, 2, 3]


def test_errors_carry_status_and_code() -> None:
    """Each webhook error sits under LongcallError with a distinct status and stable code."""
    classes = [WebhookUnauthorized, WebhookBadRequest, WebhookTooLarge]
    assert all(issubclass(cls, WebhookError) and issubclass(cls, LongcallError) for cls in classes)
    assert [(c.http_status, c.code) for c in classes] == [
        (401, "webhook_unauthorized"),
        (400, "webhook_bad_request"),
        (413, "webhook_too_large"),
    ]


def test_new_secret_is_well_formed_and_random() -> None:
    """new_secret gives whsec_ and at least 24 random bytes, which check_secret accepts."""
    first, second = new_secret(), new_secret()
    assert first != second and first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"))) >= 24
    check_secret(first)
    assert verify(BODY, delivery(secret=first), [first], now=NOW).webhook_id == "msg_1"


@pytest.mark.parametrize("size", [8, 16, 23])
def test_short_secret_is_refused(size: int) -> None:
    """A secret under 24 bytes (which the library would take) is a ConfigError."""
    secret = "whsec_" + base64.b64encode(b"k" * size).decode()
    Webhook(secret)  # the library takes it
    with pytest.raises(ConfigError, match=f"decodes to {size} bytes"):
        check_secret(secret)


def test_secret_of_24_bytes_is_accepted_with_or_without_padding() -> None:
    """24 bytes is enough, and base64 padding is optional."""
    check_secret("whsec_" + base64.b64encode(b"k" * 24).decode())
    padded = "whsec_" + base64.b64encode(b"k" * 26).decode()
    assert padded.endswith("=")
    check_secret(padded)
    check_secret(padded.rstrip("="))


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "whsec_",
        base64.b64encode(bytes(32)).decode(),  # no prefix
        "whsk_" + base64.b64encode(bytes(32)).decode(),
        "whsec_" + base64.b64encode(bytes(32)).decode().replace("A", "-", 1) + "!",
        "whsec_" + base64.urlsafe_b64encode(b"\xfb\xff" * 16).decode(),
        "whsec_" + base64.b64encode(bytes(32)).decode()[:-2] + " A",
        "whsec_" + "é" * 40,
        "whsec_A",
    ],
)
def test_malformed_secret_is_refused(secret: str) -> None:
    """A secret without the whsec_ prefix or with invalid base64 is a ConfigError."""
    with pytest.raises(ConfigError) as info:
        check_secret(secret)
    if len(secret) > 10:
        assert secret[6:16] not in str(info.value)


def test_bad_secret_configuration_is_config_error_not_refusal() -> None:
    """No secrets, one bare string, or a bad secret in the list is a ConfigError, not a 401."""
    headers = delivery()
    with pytest.raises(ConfigError, match="no webhook secret"):
        verify(BODY, headers, [], now=NOW)
    with pytest.raises(ConfigError, match="not one string"):
        verify(BODY, headers, SECRET, now=NOW)
    with pytest.raises(ConfigError, match="#2 decodes to 8 bytes"):
        verify(BODY, headers, [SECRET, "whsec_" + base64.b64encode(b"k" * 8).decode()], now=NOW)
    with pytest.raises(ConfigError, match="tolerance"):
        verify(BODY, headers, [SECRET], now=NOW, tolerance=-1)


def test_sign_gives_three_headers_with_defaults() -> None:
    """sign() returns webhook-id, an integer timestamp near now, and one v1 signature."""
    before = int(time.time())
    headers = sign(BODY, SECRET)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"].startswith("msg_")
    assert headers["webhook-id"] != sign(BODY, SECRET)["webhook-id"]
    assert before <= int(headers["webhook-timestamp"]) <= int(time.time())
    assert headers["webhook-signature"].startswith("v1,")
    assert verify(BODY, headers, [SECRET]).payload == json.loads(BODY)


def test_sign_refuses_bad_arguments() -> None:
    """sign() refuses a bad secret, an empty id and a negative timestamp."""
    with pytest.raises(ConfigError):
        sign(BODY, "whsec_c2hvcnQ=")
    with pytest.raises(ValueError, match="webhook_id"):
        sign(BODY, SECRET, webhook_id="")
    with pytest.raises(ValueError, match="timestamp"):
        sign(BODY, SECRET, timestamp=-1)


def test_import_longcall_does_not_import_standardwebhooks() -> None:
    """`import longcall` leaves standardwebhooks unimported; the webhooks module pulls it in."""
    code = (
        "import sys, longcall\n"
        "assert 'standardwebhooks' not in sys.modules, 'imported by longcall'\n"
        "import longcall.webhooks\n"
        "assert 'standardwebhooks' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_import_without_standardwebhooks_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without standardwebhooks, importing longcall.webhooks names the server extra to install."""
    for name in ("standardwebhooks", "standardwebhooks.webhooks"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "longcall.webhooks")
    with pytest.raises(ImportError, match=r"pip install 'longcall\[server\]'"):
        importlib.import_module("longcall.webhooks")


@pytest.mark.parametrize("secret", ["whsec_c2hvcnQ=", "not-a-secret", "whsec_???"])
def test_the_store_refuses_a_secret_that_could_not_verify(tmp_path: Any, secret: str) -> None:
    """Short or malformed secrets fail when added, not at the first delivery; nothing is kept."""
    import longcall

    app = longcall.App(f"sqlite:///{tmp_path}/hooks.db")
    with pytest.raises(ConfigError):
        app.store.add_hook_secret("batch", secret)
    assert app.store.hook_secrets("batch") == []
    app.close()
