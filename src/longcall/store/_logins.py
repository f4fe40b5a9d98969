"""The dashboard's logins: a random id in the browser's cookie, its SHA-256 digest here.

A login is made from a live API token and stands for it until it expires, its user logs out,
or the token is revoked: a login is only ever found through its token's row, so revoking
the token ends every login made from it at once. The id itself is returned once, when the
login is made; the database never holds it, so a copy of the table logs no one in.
"""

from __future__ import annotations

import secrets

from longcall.core.access import Login
from longcall.store._tokens import digest
from longcall.store.core import Row, StoreCore, Tx


class LoginOps(StoreCore):
    """Dashboard logins; part of :class:`~longcall.store.Store`."""

    def create_login(self, token: str, *, ttl: float) -> tuple[Login, str] | None:
        """A new login for ``token``, good for ``ttl`` seconds, and its id (returned only
        here); None when the token is unknown or revoked.

        One transaction: it also deletes the logins that can no longer be used (expired, or
        their token revoked), so the table does not grow with logins nobody ended.
        """
        if ttl <= 0:
            raise ValueError(f"a login's lifetime must be positive, not {ttl!r}")
        login_id = secrets.token_urlsafe(32)
        login_hash = digest(login_id)
        now = self.now()

        def work(tx: Tx) -> Login | None:
            tx.run("prune_logins", now=now)
            made = tx.run(
                "insert_login",
                login_hash=login_hash,
                token_hash=digest(token),
                ttl=ttl,
                now=now,
            )
            row = tx.one("login_by_hash", login_hash=login_hash, now=now) if made else None
            return None if row is None else _login(row)

        login = self._transact(work)
        return None if login is None else (login, login_id)

    def login_info(self, login_id: str) -> Login | None:
        """The live login whose id is ``login_id``, or None: unknown, ended, expired, or
        made from a token since revoked. An expired login's row is deleted as it is found."""
        login_hash = digest(login_id)
        now = self.now()
        row = self._transact(
            lambda tx: tx.one("login_by_hash", login_hash=login_hash, now=now), write=False
        )
        if row is None:
            return None
        if row["expired"]:
            self.end_login(login_id)
            return None
        return _login(row)

    def end_login(self, login_id: str) -> bool:
        """Delete the login (its user logs out); False if there was none. Safe to repeat."""
        login_hash = digest(login_id)
        return self._transact(lambda tx: tx.run("delete_login", login_hash=login_hash)) > 0

    def prune_logins(self) -> int:
        """Delete the logins that can no longer be used (expired, or their token revoked);
        the number deleted."""
        now = self.now()
        return self._transact(lambda tx: tx.run("prune_logins", now=now))


def _login(row: Row) -> Login:
    return Login(
        row["token_id"], row["user_id"], bool(row["admin"]), row["created_at"], row["expires_at"]
    )
