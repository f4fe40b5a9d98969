"""A dashboard login as the store records it."""

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
