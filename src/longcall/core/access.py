"""Who may call the service, as the store records it: API tokens, dashboard logins and
webhook secrets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Login:
    """A live login: whose token it was made from, and its times (epoch seconds)."""

    token_id: str
    user_id: str | None
    admin: bool
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """An API token (never the token itself: the store keeps its digest)."""

    token_id: str
    user_id: str | None
    admin: bool
    created_at: float
    revoked_at: float | None = None


@dataclass(frozen=True, slots=True)
class HookSecret:
    """One secret a webhook source signs with; a source may have several while rotating."""

    source: str
    secret_id: str
    secret: str
    created_at: float
