"""Session leases: who runs the agent on a session now, under which fence."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from longcall.core.jobs import SessionKey
from longcall.store.core import StoreCore, Tx, dumps


class SessionOps(StoreCore):
    """Session leases; part of :class:`~longcall.store.Store`."""

    def take_session(self, session: SessionKey, holder: str, *, kind: str, ttl: float) -> bool:
        """Take (or renew) the session's lease unless a live one is held by someone else.

        Either raises the session's fence, so a delivery under an earlier take is fenced off.
        The lease is that of ``session`` alone: the same session id in another app, or of
        another user, is another conversation with a lease of its own.
        """
        now = self.now()
        row = self._transact(
            lambda tx: tx.one(
                "take_session_lease",
                **session.as_dict(),
                holder=holder,
                kind=kind,
                ttl=ttl,
                now=now,
            ),
            durable=not self.relaxed_leases,
        )
        return row is not None

    def take_or_join_session(
        self,
        session: SessionKey,
        holder: str,
        *,
        kind: str,
        ttl: float,
        answers: Collection[str],
    ) -> Literal["taken", "joined"] | None:
        """Take the session's lease as :meth:`take_session` does ("taken"), or else recognise
        the run as the delivery that holds it ("joined"); None: the session is busy.

        ``answers`` are the call ids the run's message answers, when it consists of function
        responses alone. It joins only when a live delivery holds the session and has every
        one of those calls claimed under the lease's holder and fence: a delivery sent
        through an agent server in another process (``adk api_server``'s ``/run``) reaching
        the plugin there. Anything else, a user's own function responses included, waits as
        a user turn does. One transaction.
        """
        now = self.now()

        def work(tx: Tx) -> Literal["taken", "joined"] | None:
            params = session.as_dict()
            if tx.one("take_session_lease", **params, holder=holder, kind=kind, ttl=ttl, now=now):
                return "taken"
            if not answers:
                return None
            held = {
                row["call_id"]
                for row in tx.all(
                    "session_delivery_calls", **params, call_ids=dumps(sorted(answers)), now=now
                )
            }
            return "joined" if held >= set(answers) else None

        return self._transact(work, durable=not self.relaxed_leases)

    def renew_session(self, session: SessionKey, holder: str, *, ttl: float) -> bool:
        """Extend a lease ``holder`` still holds; False when it was lost to someone else."""
        now = self.now()
        changed = self._transact(
            lambda tx: tx.run(
                "renew_session_lease", **session.as_dict(), holder=holder, ttl=ttl, now=now
            ),
            durable=not self.relaxed_leases,
        )
        return changed > 0

    def holds_session(self, session: SessionKey, holder: str, fence: int) -> bool:
        """Whether ``holder`` still holds the session under ``fence``: nobody took the lease
        since, and it has not run out."""
        now = self.now()
        row = self._transact(
            lambda tx: tx.one(
                "session_fence_held", **session.as_dict(), holder=holder, fence=fence, now=now
            ),
            write=False,
        )
        return row is not None

    def release_session(
        self, session: SessionKey, holder: str, *, fence: int | None = None
    ) -> None:
        """Give the session's lease back if ``holder`` holds it (under ``fence``, if given:
        a delivery releases only the take it claimed under)."""

        def work(tx: Tx) -> None:
            if self._release_lease(tx, session, holder, fence):
                self._ready(tx)

        self._transact(work, durable=not self.relaxed_leases)
        self._after_ready()

    def _release_lease(self, tx: Tx, session: SessionKey, holder: str, fence: int | None) -> bool:
        """Release ``holder``'s lease on ``session`` (only the take under ``fence``, if given;
        a claim made before fences existed has none); whether it was released."""
        if fence is None:
            return tx.run("release_session_lease", **session.as_dict(), holder=holder) > 0
        params = session.as_dict()
        return tx.run("release_fenced_session_lease", **params, holder=holder, fence=fence) > 0
