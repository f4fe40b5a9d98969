"""Session leases (who runs the agent on a session now) and the scripted agent's sessions."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from longcall.core.jobs import SessionKey
from longcall.errors import FenceLost, StoreError
from longcall.store.core import StoreCore, Tx, dumps, loads


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event of a scripted-agent session."""

    session_id: str
    seq: int
    invocation_id: str
    author: str
    content: dict[str, Any]
    created_at: float


class SessionOps(StoreCore):
    """Session leases and scripted-agent sessions; part of :class:`~longcall.store.Store`."""

    def take_session(self, session: SessionKey, holder: str, *, kind: str, ttl: float) -> bool:
        """Take (or renew) the session's lease unless a live one is held by someone else.

        Either raises the session's fence, so a delivery under an earlier take is fenced off.
        The lease is that of ``session`` alone: the same session id in another app, or of
        another user, is another conversation with a lease of its own.
        """
        now = self._now()
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
        now = self._now()

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
        now = self._now()
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
        now = self._now()
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

    def ensure_session(self, session_id: str, *, app_name: str, user_id: str) -> str:
        """Create the session for ``user_id`` unless it exists; return whose it is (the user
        who first used the id keeps it)."""
        now = self._now()

        def work(tx: Tx) -> str:
            tx.run(
                "insert_session", session_id=session_id, app_name=app_name, user_id=user_id, now=now
            )
            row = tx.one("get_session", session_id=session_id)
            assert row is not None
            return str(row["user_id"])

        return self._transact(work)

    def append_session_events(
        self,
        session_id: str,
        events: Iterable[tuple[str, str, dict[str, Any], str | None]],
        *,
        fence: tuple[SessionKey, str, int] | None = None,
    ) -> list[int | None]:
        """Append (invocation_id, author, content, final_response_to) events in one commit.

        An event that closes a call (``final_response_to`` set) is appended at most once per
        session and call: a repeat is skipped and gets None instead of a sequence number.
        With ``fence`` (the session's key, holder, token) nothing is appended unless that
        holder still holds the session under that token, checked in the same transaction:
        :class:`FenceLost`.
        """
        now = self._now()
        events = list(events)

        def work(tx: Tx) -> list[int | None]:
            if fence is not None:
                key, holder, token = fence
                if (
                    tx.one(
                        "session_fence_held",
                        **key.as_dict(),
                        holder=holder,
                        fence=token,
                        now=now,
                    )
                    is None
                ):
                    raise FenceLost(session_id, holder, token)
            seqs: list[int | None] = []
            for invocation_id, author, content, final_to in events:
                if final_to is not None and tx.one(
                    "has_final_response", session_id=session_id, call_id=final_to
                ):
                    seqs.append(None)
                    continue
                seq = tx.one("bump_session_seq", session_id=session_id)
                if seq is None:
                    raise StoreError(f"no session {session_id!r}")
                tx.run(
                    "insert_session_event",
                    session_id=session_id,
                    seq=seq["event_seq"],
                    invocation_id=invocation_id,
                    author=author,
                    content=dumps(content),
                    response_to=final_to,
                    final=final_to is not None,
                    now=now,
                )
                seqs.append(seq["event_seq"])
            return seqs

        return self._transact(work)

    def session_owner(self, session_id: str) -> str | None:
        """The user whose scripted-agent session this is (None: no such session)."""
        row = self._transact(lambda tx: tx.one("get_session", session_id=session_id), write=False)
        return None if row is None else str(row["user_id"])

    def session_events(
        self, session_id: str, *, after: int = 0, user_id: str | None = None
    ) -> list[SessionEvent]:
        """The session's events after ``after``; with ``user_id``, none unless it is theirs."""

        def work(tx: Tx) -> list[Any]:
            if user_id is not None:
                owner = tx.one("get_session", session_id=session_id)
                if owner is None or owner["user_id"] != user_id:
                    return []
            return tx.all("session_events", session_id=session_id, after=after)

        rows = self._transact(work, write=False)
        return [
            SessionEvent(
                r["session_id"],
                r["seq"],
                r["invocation_id"],
                r["author"],
                loads(r["content"]),
                r["created_at"],
            )
            for r in rows
        ]

    def session_exists(self, session_id: str) -> bool:
        row = self._transact(lambda tx: tx.one("get_session", session_id=session_id), write=False)
        return row is not None

    def has_final_response(self, session_id: str, call_id: str) -> bool:
        row = self._transact(
            lambda tx: tx.one("has_final_response", session_id=session_id, call_id=call_id),
            write=False,
        )
        return row is not None
