"""What a webhook secret is (Standard Webhooks: ``whsec_`` and base64 of 24 bytes or more).

Plain values and checks with no dependency, so the store can refuse a secret that could not
verify anything without importing the webhook verifier (which needs the server extra).
"""

from __future__ import annotations

import base64
from secrets import token_bytes

from longcall.errors import ConfigError

SECRET_PREFIX = "whsec_"
MIN_SECRET_BYTES = 24
"""The spec's minimum secret length; ``standardwebhooks`` itself accepts 8."""


def new_secret() -> str:
    """A fresh secret: ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(token_bytes(32)).decode("ascii")


def check_secret(secret: str) -> None:
    """Refuse, with :class:`~longcall.errors.ConfigError`, a secret that cannot work.

    A secret is ``whsec_`` followed by standard base64 (padding optional) of at least
    :data:`MIN_SECRET_BYTES` bytes. Call it at start-up so a bad secret fails there rather
    than on the first delivery. The error message never contains the secret.
    """
    decode_secret(secret, "webhook secret")


def decode_secret(secret: str, label: str) -> bytes:
    """The key bytes of ``secret``; ConfigError naming ``label`` (never the secret) if it
    cannot work."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise ConfigError(f"{label} must start with {SECRET_PREFIX!r} followed by base64")
    encoded = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except ValueError:  # binascii.Error, or a non-ASCII character
        raise ConfigError(
            f"{label} is not valid base64 after {SECRET_PREFIX!r} "
            "(standard alphabet A-Z a-z 0-9 + /, no spaces)"
        ) from None  # the cause could quote the secret
    if len(key) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"{label} decodes to {len(key)} bytes; Standard Webhooks needs at least "
            f"{MIN_SECRET_BYTES} (make one with longcall.webhooks.new_secret())"
        )
    return key
