"""pydantic-ai conversations kept in longcall's own database, beside the job table.

Two tables of this adapter's own (``sql/<dialect>.sql``, made on first use): each session's
message history, one pydantic-ai ``ModelMessage`` per row, and the long-running calls it
made with how far each is answered. A run's new messages and call states are written in one
transaction that also checks the delivery's fence, so a delivery that lost its session writes
nothing (no window between check and write), and a run that raced another on the same session
(which the session lease prevents) fails on the messages' primary key instead of interleaving.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from longcall.core.jobs import SessionKey
from longcall.errors import FenceLost
from longcall.store import Store
from longcall.store.core import Tx
from longcall.store.queries import parse_queries

CallState = Literal["open", "noted", "answered"]


@dataclass(frozen=True, slots=True)
class OpenedCall:
    """A long-running call a run left deferred (pydantic-ai's ``DeferredToolRequests``)."""

    call_id: str
    tool_name: str
    run_id: str | None
    job_id: str | None


@dataclass(frozen=True, slots=True)
class CallRecord:
    call_id: str
    tool_name: str
    run_id: str | None
    job_id: str | None
    state: CallState


@dataclass(frozen=True, slots=True)
class Conversation:
    """A session as loaded: its history, its calls, and the sequence number it ends at."""

    messages: list[ModelMessage]
    calls: dict[str, CallRecord]
    last_seq: int

    def open_calls(self) -> list[CallRecord]:
        """The calls of the last response still awaiting their deferred results, in order."""
        return [c for c in self.calls.values() if c.state == "open"]


def _queries(dialect: str) -> dict[str, str]:
    sql = resources.files("longcall.pydantic_ai") / "sql" / f"{dialect}.sql"
    return parse_queries(sql.read_text("utf-8"))


def dump_message(message: ModelMessage) -> str:
    return ModelMessagesTypeAdapter.dump_json([message]).decode("utf-8")


def load_messages(rows: Iterable[str]) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for row in rows:
        messages.extend(ModelMessagesTypeAdapter.validate_json(row))
    return messages


class Conversations:
    """pydantic-ai sessions in ``store``'s database; the tables are made here."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.add_queries(_queries(store.dialect))
        store.transact(self._create_tables)

    @staticmethod
    def _create_tables(tx: Tx) -> None:
        tx.run("pai_lock")
        tx.run("pai_create_messages")
        tx.run("pai_create_calls")

    def load(self, key: SessionKey) -> Conversation:
        """The session's history and calls (empty for a session never written)."""

        def work(tx: Tx) -> Conversation:
            rows = tx.all("pai_messages", **key.as_dict())
            calls = tx.all("pai_calls", **key.as_dict())
            return Conversation(
                messages=load_messages(str(r["message"]) for r in rows),
                calls={
                    str(c["call_id"]): CallRecord(
                        str(c["call_id"]), c["tool_name"], c["run_id"], c["job_id"], c["state"]
                    )
                    for c in calls
                },
                last_seq=int(rows[-1]["seq"]) if rows else 0,
            )

        return self.store.transact(work, write=False)

    def append(
        self,
        key: SessionKey,
        *,
        after_seq: int,
        messages: Sequence[ModelMessage],
        states: Mapping[str, CallState],
        opened: Sequence[OpenedCall],
        fence: tuple[str, int] | None = None,
    ) -> None:
        """Append a run's messages after ``after_seq``, set call states and record the calls
        it opened, all in one commit.

        With ``fence`` (holder, token) nothing is written unless that holder still holds the
        session under that token, checked in the same transaction: :class:`FenceLost`. A
        session that grew past ``after_seq`` meanwhile fails on the primary key (a store
        error): the run is not stored and the caller's retry starts again from the new end.
        """
        now = self.store.now()
        ids = key.as_dict()
        rows = [(m.run_id, dump_message(m)) for m in messages]

        def work(tx: Tx) -> None:
            if fence is not None:
                holder, token = fence
                if tx.one("session_fence_held", **ids, holder=holder, fence=token, now=now) is None:
                    raise FenceLost(key.session_id, holder, token)
            for offset, (run_id, body) in enumerate(rows, start=1):
                tx.run(
                    "pai_insert_message",
                    **ids,
                    seq=after_seq + offset,
                    run_id=run_id,
                    message=body,
                    now=now,
                )
            for call_id, state in states.items():
                tx.run("pai_set_call_state", **ids, call_id=call_id, state=state, now=now)
            for call in opened:
                tx.run(
                    "pai_insert_call",
                    **ids,
                    call_id=call.call_id,
                    tool_name=call.tool_name,
                    run_id=call.run_id,
                    job_id=call.job_id,
                    now=now,
                )

        self.store.transact(work)

    def answered(self, key: SessionKey, call_id: str) -> bool:
        """Whether the session holds the closing response to ``call_id``."""
        row = self.store.transact(
            lambda tx: tx.one("pai_call_answered", **key.as_dict(), call_id=call_id), write=False
        )
        return row is not None
