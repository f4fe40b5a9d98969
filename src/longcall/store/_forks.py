"""Forks of runs (``app.fork_run``): a new run holding a copy of another run's first steps."""

from __future__ import annotations

from typing import Any

from longcall.core.runs import Run
from longcall.errors import InvalidValue, RunNotFound
from longcall.store.core import StoreCore, Tx, dumps
from longcall.store.runs import RUNS_CHANNEL, run_from_row


class ForkOps(StoreCore):
    """Forking runs; part of :class:`~longcall.store.Store`."""

    def fork_run(
        self, run_id: str, new_run_id: str, *, from_step: int, input: Any, version: str = "1"
    ) -> Run:
        """In one transaction: check ``from_step`` against the run's record (1 to one past
        its last recorded step), create ``new_run_id`` queued with ``input``, the original's
        workflow, owner, retries, timeout, queue and priority, and ``forked_from`` /
        ``forked_step`` set, and
        copy the original's checkpoints before ``from_step`` into it.

        The copy is of what is committed when the transaction runs: a run still executing
        may record more steps after it. RunNotFound for an unknown run, InvalidValue for a
        step out of range; nothing is written then.
        """
        now = self.now()

        def work(tx: Tx) -> Run:
            if tx.one("get_run", run_id=run_id) is None:
                raise RunNotFound(run_id)
            row = tx.one("last_position", run_id=run_id)
            last = int(row["last"]) if row is not None else 0
            if not 1 <= from_step <= last + 1:
                raise InvalidValue(
                    "from_step",
                    f"is a step from 1 to {last + 1} for run {run_id!r} (it recorded {last}), "
                    f"not {from_step}",
                )
            forked = tx.one(
                "insert_fork",
                run_id=new_run_id,
                from_run_id=run_id,
                input=dumps(input),
                step=from_step,
                version=version,
                now=now,
            )
            assert forked is not None  # the original exists: it was read above
            tx.run("copy_steps", run_id=new_run_id, from_run_id=run_id, step=from_step)
            tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
            return run_from_row(forked)

        forked = self._transact(work)
        self._runs_queued()
        return forked
