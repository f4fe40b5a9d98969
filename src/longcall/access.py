"""Who may call the service: API tokens, dashboard logins and webhook secrets.

``app.access`` is what the server and the CLI use to make, list and end them; the store keeps
only digests of tokens and logins, so a token is shown once, when it is made.
"""

from __future__ import annotations

from longcall.core.access import HookSecret, Login, TokenInfo
from longcall.runtime import Runtime


class Access:
    """API tokens, dashboard logins and webhook secrets in the app's database."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    # -- API tokens --------------------------------------------------------------------

    def create_token(self, *, user_id: str | None, admin: bool = False) -> tuple[TokenInfo, str]:
        """A new token for ``user_id`` (an admin's when ``admin``): its record and the token."""
        return self._runtime.store.create_token(user_id=user_id, admin=admin)

    def token_info(self, token: str) -> TokenInfo | None:
        """The live token ``token`` is (None: unknown or revoked)."""
        return self._runtime.store.token_info(token)

    def tokens(self) -> list[TokenInfo]:
        return self._runtime.store.tokens()

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a token; False when there is no live token of that id."""
        return self._runtime.store.revoke_token(token_id)

    # -- dashboard logins --------------------------------------------------------------

    def create_login(self, token: str, *, ttl: float) -> tuple[Login, str] | None:
        """A login made from a live token, lasting ``ttl`` seconds, and its cookie value;
        None when the token is not a live one."""
        return self._runtime.store.create_login(token, ttl=ttl)

    def login_info(self, login_id: str) -> Login | None:
        return self._runtime.store.login_info(login_id)

    def end_login(self, login_id: str) -> bool:
        return self._runtime.store.end_login(login_id)

    # -- webhook secrets ---------------------------------------------------------------

    def add_webhook_secret(self, source: str, secret: str) -> HookSecret:
        """Add a secret ``source`` signs with (several may live while one is rotated)."""
        return self._runtime.store.add_hook_secret(source, secret)

    def webhook_secrets(self, source: str | None = None) -> list[HookSecret]:
        return self._runtime.store.hook_secrets(source)

    def retire_webhook_secret(self, source: str, secret_id: str) -> bool:
        """Stop accepting a secret; False when ``source`` has no live secret of that id."""
        return self._runtime.store.retire_hook_secret(source, secret_id)
