"""Webhook sources and the secrets that sign their deliveries.

A source has one or more secrets: while a sender rotates, both the old and the new one
verify, until the old one is retired. Secrets are kept as given (HMAC needs them in the
clear), so the database deserves the care the secrets do.
"""

from __future__ import annotations

import uuid

from longcall.core.access import HookSecret
from longcall.core.webhook_secrets import check_secret
from longcall.store.core import StoreCore, Tx


class HookOps(StoreCore):
    """Webhook secrets; part of :class:`~longcall.store.Store`."""

    def add_hook_secret(self, source: str, secret: str) -> HookSecret:
        """Add a secret to ``source`` (creating the source); return it with its new id.

        A secret that could not verify anything (not ``whsec_`` + base64 of 24 bytes or more)
        raises ConfigError and nothing is stored: better refused here than at the first
        delivery.
        """
        check_secret(secret)
        now = self.now()
        secret_id = f"sec_{uuid.uuid4().hex[:12]}"

        def work(tx: Tx) -> HookSecret:
            tx.run("insert_hook_secret", source=source, secret_id=secret_id, secret=secret, now=now)
            rows = tx.all("hook_secrets", source=source)
            row = next(r for r in rows if r["secret_id"] == secret_id)
            return HookSecret(source, secret_id, secret, row["created_at"])

        return self._transact(work)

    def hook_secrets(self, source: str | None = None) -> list[HookSecret]:
        """The secrets of ``source``, oldest first (of every source when None)."""
        if source is None:
            rows = self._transact(lambda tx: tx.all("all_hook_secrets"), write=False)
        else:
            rows = self._transact(lambda tx: tx.all("hook_secrets", source=source), write=False)
        return [HookSecret(r["source"], r["secret_id"], r["secret"], r["created_at"]) for r in rows]

    def retire_hook_secret(self, source: str, secret_id: str) -> bool:
        """Stop accepting deliveries signed with this secret; False when there was none."""
        changed = self._transact(
            lambda tx: tx.run("delete_hook_secret", source=source, secret_id=secret_id)
        )
        return changed > 0
