"""API bearer tokens: kept as a SHA-256 digest, shown once when created.

A token names a user (it sees and changes only that user's jobs) or is an admin token (sees
everything). A token is ``lc_<id>_<secret>``; the id is what ``tokens list`` and ``tokens
revoke`` use, and the database never holds the secret part.
"""

from __future__ import annotations

import hashlib
import secrets

from longcall.core.access import TokenInfo
from longcall.store.core import StoreCore, Tx


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenOps(StoreCore):
    """API tokens; part of :class:`~longcall.store.Store`."""

    def create_token(self, *, user_id: str | None, admin: bool = False) -> tuple[TokenInfo, str]:
        """A new token for ``user_id`` (or an admin token); the token itself is returned once."""
        if not admin and not user_id:
            raise ValueError("a token is for a user, or an admin token")
        token_id = secrets.token_hex(6)
        token = f"lc_{token_id}_{secrets.token_urlsafe(32)}"
        now = self.now()

        def work(tx: Tx) -> TokenInfo:
            tx.run(
                "insert_token",
                token_id=token_id,
                token_hash=digest(token),
                user_id=user_id,
                admin=admin,
                now=now,
            )
            row = tx.one("token_by_hash", token_hash=digest(token))
            assert row is not None
            return TokenInfo(token_id, user_id, admin, row["created_at"])

        return self._transact(work), token

    def token_info(self, token: str) -> TokenInfo | None:
        """Who a presented token is, or None for an unknown or revoked one."""
        row = self._transact(
            lambda tx: tx.one("token_by_hash", token_hash=digest(token)), write=False
        )
        if row is None:
            return None
        return TokenInfo(row["token_id"], row["user_id"], bool(row["admin"]), row["created_at"])

    def tokens(self) -> list[TokenInfo]:
        rows = self._transact(lambda tx: tx.all("all_tokens"), write=False)
        return [
            TokenInfo(
                r["token_id"], r["user_id"], bool(r["admin"]), r["created_at"], r["revoked_at"]
            )
            for r in rows
        ]

    def revoke_token(self, token_id: str) -> bool:
        now = self.now()
        return self._transact(lambda tx: tx.run("revoke_token", token_id=token_id, now=now)) > 0
