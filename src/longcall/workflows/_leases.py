"""Keeping the runs an app executes: one heartbeat renews every lease it holds.

An execution holds its run under a lease that runs out unless renewed; a worker that dies
stops renewing, and another takes the run over. Renewing each execution from a timer of its
own costs a thread and a transaction per run; here one thread renews them all with one
statement a beat, every third of the lease, and tells each execution what it learned: the
run is gone (taken over) or someone asked for it to stop.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from longcall.store import Store

log = logging.getLogger("longcall.workflows")


class Holding(Protocol):
    """What the heartbeat needs of an execution."""

    @property
    def lease_key(self) -> tuple[str, str]:
        """(run id, holder)."""
        ...

    def renewed(self, cancelling: bool | None) -> None:
        """The outcome of a renewal: None when the run is no longer ours."""
        ...


class Heartbeat:
    """Renews the leases of the executions it holds, from one daemon thread."""

    def __init__(self, store: Store, lease: float) -> None:
        self.store = store
        self.lease = lease
        self._held: dict[int, Holding] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, execution: Holding) -> None:
        with self._lock:
            self._held[id(execution)] = execution
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._beat, name="longcall-heartbeat", daemon=True
                )
                self._thread.start()

    def release(self, execution: Holding) -> None:
        with self._lock:
            self._held.pop(id(execution), None)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(5)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            with self._lock:
                held = list(self._held.values())
            if not held:
                continue
            try:
                still = self.store.renew_runs([e.lease_key for e in held], lease=self.lease)
            except Exception:
                # One failed renewal (the database busy or away for a moment) is not the
                # end: the lease has two more beats before it runs out.
                log.warning("renewing %d run leases failed", len(held), exc_info=True)
                continue
            with self._lock:
                current = [e for e in held if self._held.get(id(e)) is e]
            for execution in current:  # one that ended meanwhile has nothing to learn
                execution.renewed(still.get(execution.lease_key))
