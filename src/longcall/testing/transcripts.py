"""The scripted agent's sessions: one transcript per session id, kept beside longcall's tables.

They are not part of the job table's schema or of the :class:`~longcall.store.Store`
contract: this module brings its own SQL (``testing/sql/<dialect>.sql``), makes its two
tables on first use and runs its queries in the store's transactions, so a delivery's fence
is checked in the same transaction that appends (no window between check and write).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from longcall.core.jobs import SessionKey
from longcall.errors import FenceLost, StoreError
from longcall.store import Store
from longcall.store.core import Tx, dumps, loads
from longcall.store.queries import parse_queries

# (invocation id, author, content, the call it closes or None)
NewEvent = tuple[str, str, dict[str, Any], str | None]


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event of a scripted-agent session."""

    session_id: str
    seq: int
    invocation_id: str
    author: str
    content: dict[str, Any]
    created_at: float


def _queries(dialect: str) -> dict[str, str]:
    sql = resources.files("longcall.testing") / "sql" / f"{dialect}.sql"
    return parse_queries(sql.read_text("utf-8"))


class Transcripts:
    """The scripted agent's sessions in ``store``'s database; the tables are made here."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.add_queries(_queries(store.dialect))
        store.transact(self._create_tables)

    @staticmethod
    def _create_tables(tx: Tx) -> None:
        tx.run("transcripts_lock")
        tx.run("transcripts_create_sessions")
        tx.run("transcripts_create_events")
        tx.run("transcripts_create_final_index")

    def ensure_session(self, session_id: str, *, app_name: str, user_id: str) -> str:
        """Create the session for ``user_id`` unless it exists; return whose it is (the user
        who first used the id keeps it)."""
        now = self.store.now()

        def work(tx: Tx) -> str:
            tx.run(
                "transcripts_insert_session",
                session_id=session_id,
                app_name=app_name,
                user_id=user_id,
                now=now,
            )
            row = tx.one("transcripts_get_session", session_id=session_id)
            assert row is not None
            return str(row["user_id"])

        return self.store.transact(work)

    def append(
        self,
        session_id: str,
        events: Iterable[NewEvent],
        *,
        fence: tuple[SessionKey, str, int] | None = None,
    ) -> list[int | None]:
        """Append events in one commit; their sequence numbers, in order.

        An event that closes a call (its last item set) is appended at most once per session
        and call: a repeat is skipped and gets None. With ``fence`` (the session's key,
        holder, token) nothing is appended unless that holder still holds the session under
        that token, checked in the same transaction: :class:`FenceLost`.
        """
        now = self.store.now()
        events = list(events)

        def work(tx: Tx) -> list[int | None]:
            if fence is not None:
                key, holder, token = fence
                held = tx.one(
                    "session_fence_held", **key.as_dict(), holder=holder, fence=token, now=now
                )
                if held is None:
                    raise FenceLost(session_id, holder, token)
            return [self._append_one(tx, session_id, event, now) for event in events]

        return self.store.transact(work)

    @staticmethod
    def _append_one(tx: Tx, session_id: str, event: NewEvent, now: float | None) -> int | None:
        invocation_id, author, content, final_to = event
        if final_to is not None and tx.one(
            "transcripts_has_final_response", session_id=session_id, call_id=final_to
        ):
            return None
        row = tx.one("transcripts_bump_seq", session_id=session_id)
        if row is None:
            raise StoreError(f"no session {session_id!r}")
        seq = int(row["event_seq"])
        tx.run(
            "transcripts_insert_event",
            session_id=session_id,
            seq=seq,
            invocation_id=invocation_id,
            author=author,
            content=dumps(content),
            response_to=final_to,
            final=final_to is not None,
            now=now,
        )
        return seq

    def owner(self, session_id: str) -> str | None:
        """The user whose session this is (None: no such session)."""
        row = self.store.transact(
            lambda tx: tx.one("transcripts_get_session", session_id=session_id), write=False
        )
        return None if row is None else str(row["user_id"])

    def events(
        self, session_id: str, *, after: int = 0, user_id: str | None = None
    ) -> list[SessionEvent]:
        """The session's events after ``after``; with ``user_id``, none unless it is theirs."""

        def work(tx: Tx) -> list[Any]:
            if user_id is not None:
                owner = tx.one("transcripts_get_session", session_id=session_id)
                if owner is None or owner["user_id"] != user_id:
                    return []
            return tx.all("transcripts_events", session_id=session_id, after=after)

        return [
            SessionEvent(
                r["session_id"],
                r["seq"],
                r["invocation_id"],
                r["author"],
                loads(r["content"]),
                r["created_at"],
            )
            for r in self.store.transact(work, write=False)
        ]

    def exists(self, session_id: str) -> bool:
        return self.owner(session_id) is not None

    def has_final_response(self, session_id: str, call_id: str) -> bool:
        """Whether the session holds the closing response to ``call_id``."""
        row = self.store.transact(
            lambda tx: tx.one(
                "transcripts_has_final_response", session_id=session_id, call_id=call_id
            ),
            write=False,
        )
        return row is not None
