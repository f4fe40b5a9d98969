"""Durable streams a run writes (``ctx.stream``) and clients read from any position.

A stream is the run's items under one key, numbered 1, 2, 3 … (``seq``). Each item has an
*origin* naming the write that made it, unique per stream, so a write replayed on resume
inserts nothing. The item of origin ``end`` closes the stream; a stream whose run has
finished is over as well, closed or not (:meth:`RunStreamOps.stream_items` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longcall.errors import RunNotFound, WorkflowError
from longcall.store.core import StoreCore, Tx, dumps, loads

END = "end"  # the origin of the item that closes a stream
TERMINAL = frozenset({"completed", "failed", "cancelled"})
SEQ_RETRIES = 50  # rival writers of one stream that took the same seq (PostgreSQL)


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One value of a run's stream: ``seq`` is its position (resume with ``after=seq``);
    ``attempt`` is None for a write from the workflow body, else the task attempt that wrote
    it (``"<task position>.<execution>.a<attempt>"``): a new attempt of the same task means
    the one before it failed or crashed, and its items were a partial answer."""

    seq: int
    value: Any
    attempt: str | None


class StreamClosed(WorkflowError):
    """``ctx.stream`` to a stream the run closed already."""


class _SeqTaken(Exception):
    """Another writer committed the same seq first: the insert is tried again."""


class RunStreamOps(StoreCore):
    """Run streams; part of :class:`~longcall.store.Store`."""

    def _is_unique_violation(self, exc: BaseException) -> bool:
        return False  # each backend says (the Store and its backends override this)

    def write_stream(
        self, run_id: str, holder: str, key: str, origin: str, value: Any, *, close: bool = False
    ) -> int | None:
        """Append ``value`` (or, with ``close``, the end) to the stream ``key`` of the run
        ``holder`` executes: its seq, or None when nothing was written because ``origin``
        was written before (a replay) or the run is no longer ``holder``'s. StreamClosed for
        a value after the end; closing twice is a no-op. One transaction per write."""
        now = self.now()
        data = None if close else dumps(value)
        origin = END if close else origin

        def work(tx: Tx) -> int | None:
            try:
                row = tx.one(
                    "insert_stream_item",
                    run_id=run_id,
                    key=key,
                    origin=origin,
                    value=data,
                    holder=holder,
                    now=now,
                )
            except Exception as exc:  # the primary key: a rival took this seq
                if self._is_unique_violation(exc):
                    raise _SeqTaken from exc
                raise
            if row is not None:
                return int(row["seq"])
            why = tx.one("stream_write_refusal", run_id=run_id, key=key, origin=origin)
            if why is not None and why["closed"] and not why["replayed"] and not close:
                raise StreamClosed(f"stream {key!r} of run {run_id!r} is closed")
            return None

        for _ in range(SEQ_RETRIES):
            try:
                return self._transact(work)
            except _SeqTaken:
                continue
        raise WorkflowError(f"stream {key!r} of run {run_id!r}: too many rival writers")

    def stream_items(
        self, run_id: str, key: str, *, after: int = 0, limit: int = 500
    ) -> tuple[list[StreamItem], bool]:
        """The stream's items after seq ``after`` (at most ``limit``), and whether the stream
        ends with them: it was closed, or its run has finished and nothing is left.
        RunNotFound for an unknown run; an unknown key is an empty stream."""

        def work(tx: Tx) -> tuple[list[StreamItem], bool]:
            # The status first: every write of a finished run committed before its end did,
            # so rows read after it are all there are.
            run = tx.one("stream_run_status", run_id=run_id)
            if run is None:
                raise RunNotFound(run_id)
            rows = tx.all("stream_items", run_id=run_id, key=key, after=after, limit=limit)
            items: list[StreamItem] = []
            for row in rows:
                if row["origin"] == END:
                    return items, True
                items.append(StreamItem(int(row["seq"]), loads(row["value"]), _attempt(row)))
            return items, run["status"] in TERMINAL and len(rows) < limit

        return self._transact(work, write=False)


def _attempt(row: Any) -> str | None:
    origin: str = row["origin"]
    if not origin.startswith("t"):
        return None
    return origin[1:].rpartition(".")[0]
