"""Messages to runs (``app.send`` and ``ctx.recv``) and values runs publish (``ctx.set_event``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longcall.errors import RunNotFound, RunStateError
from longcall.store.core import StoreCore, Tx, dumps, loads
from longcall.store.runs import RUNS_CHANNEL, Checkpoint


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message kept for a run: its number among the run's messages, and whether this send
    stored it (False: its idempotency key had stored it before)."""

    run_id: str
    topic: str
    seq: int
    created: bool


class RunMessageOps(StoreCore):
    """Run messages and published values; part of :class:`~longcall.store.Store`."""

    def send_message(
        self, run_id: str, topic: str, message: Any, *, idempotency_key: str | None = None
    ) -> SentMessage:
        """Keep ``message`` for the run's next ``recv`` of ``topic``, waking the run if it
        waits in one. Raises RunNotFound, or RunStateError for a run that has finished."""
        now = self.now()
        woke: list[bool] = []

        def work(tx: Tx) -> SentMessage:
            woke.clear()  # a transaction tried again starts over
            if idempotency_key is not None:
                sent = tx.one("message_by_key", run_id=run_id, key=idempotency_key)
                if sent is not None:
                    return SentMessage(run_id, sent["topic"], sent["seq"], False)
            run = tx.one("number_message", run_id=run_id, topic=topic, now=now)
            if run is None:
                found = tx.one("get_run", run_id=run_id)
                if found is None:
                    raise RunNotFound(run_id)
                raise RunStateError(f"run {run_id!r} has {found['status']}: it takes no messages")
            seq = run["message_seq"]
            inserted = tx.one(
                "insert_message",
                run_id=run_id,
                seq=seq,
                topic=topic,
                message=dumps(message),
                key=idempotency_key,
                now=now,
            )
            if inserted is None:  # the same key, sent at the same moment, got there first
                sent = tx.one("message_by_key", run_id=run_id, key=idempotency_key)
                assert sent is not None
                return SentMessage(run_id, sent["topic"], sent["seq"], False)
            if run["status"] == "queued" and run["recv_topic"] == topic:
                tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
                woke.append(True)
            return SentMessage(run_id, topic, seq, True)

        sent = self._transact(work)
        if woke:
            self._runs_queued()
        return sent

    def take_message(
        self, run_id: str, holder: str, topic: str, step: Checkpoint
    ) -> tuple[bool, Any]:
        """The oldest message of ``topic`` not received yet, recorded as the run's checkpoint
        ``step`` (its result the message) in the same transaction: (False, None) when there
        is none, or the run is no longer ``holder``'s."""
        now = self.now()

        def work(tx: Tx) -> tuple[bool, Any]:
            row = tx.one("next_message", run_id=run_id, topic=topic)
            if row is None:
                return False, None
            message = loads(row["message"])
            recorded = Checkpoint(
                step.position,
                step.name,
                step.args_hash,
                {"message": message, "seq": row["seq"]},
                [],
                1,
                step.started_at,
                step.finished_at,
            )
            if not recorded.insert(tx, run_id, holder):
                return False, None
            tx.run("mark_received", run_id=run_id, seq=row["seq"], now=now)
            return True, message

        return self._transact(work)

    def wake_for_message(self, run_id: str, topic: str) -> bool:
        """After a run suspended in a recv of ``topic``: queue it now if a message of that
        topic came meanwhile (a send that saw the run still running did not wake it)."""
        now = self.now()

        def work(tx: Tx) -> bool:
            if tx.one("wake_for_message", run_id=run_id, topic=topic, now=now) is None:
                return False
            tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
            return True

        woke = self._transact(work)
        if woke:
            self._runs_queued()
        return woke

    def set_run_value(self, run_id: str, key: str, value: Any) -> None:
        now = self.now()
        self._transact(
            lambda tx: tx.run("set_run_value", run_id=run_id, key=key, value=dumps(value), now=now)
        )

    def run_value(self, run_id: str, key: str) -> tuple[bool, Any]:
        """(True, value) when the run has published ``key``; (False, None) when not yet."""
        row = self._transact(lambda tx: tx.one("run_value", run_id=run_id, key=key), write=False)
        return (False, None) if row is None else (True, loads(row["value"]))
