"""Taking a session's lease for a run, renewing it and giving it back.

A user's turn (``app.session_turn``, ``app.run_turn``) and a framework's run (google-adk's
:class:`~longcall.adk.LongcallPlugin`) both hold the session's lease while the agent runs, so
a delivery into that session waits for them and they wait for a delivery. Both take it here.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from longcall.core.backoff import exponential_ceiling
from longcall.core.jobs import SessionKey
from longcall.runtime import Runtime

# The waits between tries grow from 5 ms to a quarter of a second: a resume that holds the
# session usually ends within a few of them, and a long one is not polled hard.
FIRST_WAIT, LONGEST_WAIT = 0.005, 0.25


@dataclass(frozen=True, slots=True)
class Taken:
    """How a take ended: ``"taken"`` (the lease is the holder's now), ``"joined"`` (the run is
    the delivery that holds it) or None (still busy after the wait limit); and whether it
    waited (the session may have changed meanwhile)."""

    outcome: Literal["taken", "joined"] | None
    waited: float


class SessionTurns:
    """The session leases of runs, on the runtime's store and settings."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def take(
        self,
        session: SessionKey,
        holder: str,
        *,
        kind: str = "turn",
        answers: frozenset[str] = frozenset(),
        wait_limit: float | None = None,
    ) -> Taken:
        """Take ``session``'s lease for ``holder``, waiting while someone else holds it.

        ``answers`` (the call ids, when the run's message is function responses alone): a
        run that answers only calls a live delivery claimed is that delivery, sent through
        another process's runner; it joins the delivery's lease instead of waiting for it.
        ``wait_limit`` (seconds): give up after waiting this long (None waits for good).
        """
        waited = 0.0
        for attempt in itertools.count(1):
            outcome = await self._try(session, holder, kind, answers)
            if outcome is not None or (wait_limit is not None and waited >= wait_limit):
                return Taken(outcome, waited)
            delay = exponential_ceiling(attempt, base=FIRST_WAIT, cap=LONGEST_WAIT)
            await asyncio.sleep(delay)
            waited += delay
        raise AssertionError("unreachable")

    async def _try(
        self, session: SessionKey, holder: str, kind: str, answers: frozenset[str]
    ) -> Literal["taken", "joined"] | None:
        """One try, one store call."""
        runtime, store = self.runtime, self.runtime.store
        if not answers:
            taken = await runtime.in_thread(
                store.take_session, session, holder, kind=kind, ttl=runtime.session_lease
            )
            return "taken" if taken else None
        return await runtime.in_thread(
            store.take_or_join_session,
            session,
            holder,
            kind=kind,
            ttl=runtime.session_lease,
            answers=answers,
        )

    def renew(self, held: Sequence[tuple[SessionKey, str]]) -> list[bool]:
        """Renew each (session, holder) lease for another ``session_lease``; whether each is
        still its holder's. Blocking: call it on the runtime's pool."""
        store, ttl = self.runtime.store, self.runtime.session_lease
        return [store.renew_session(session, holder, ttl=ttl) for session, holder in held]

    def release(self, session: SessionKey, holder: str) -> None:
        """Give the lease back (nothing happens if ``holder`` no longer has it). Blocking."""
        self.runtime.store.release_session(session, holder)
