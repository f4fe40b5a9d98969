"""Child workflows in the store: a run started by another run's ``ctx.start_child``, once per
(parent, key); the child's end waking its waiting parent; a parent's cancel reaching its
children."""

from __future__ import annotations

from typing import Any

from longcall.core.runs import Run
from longcall.store.core import Tx, dumps
from longcall.store.runs import CANCELLED, RUNS_CHANNEL, RunOps, run_from_row

# The recv topic a parent waiting in ``handle.result()`` is suspended on: it shows as sleeping.
CHILD_TOPIC = "longcall.child:"


def waiting_topic(child_run_id: str) -> str:
    return CHILD_TOPIC + child_run_id


class RunChildOps(RunOps):
    """Child runs; part of :class:`~longcall.store.Store`."""

    def create_child_run(
        self,
        run_id: str,
        workflow_id: str,
        input: Any,
        *,
        parent_run_id: str,
        child_key: str,
        on_parent_cancel: str,
        user_id: str | None = None,
        version: str = "1",
    ) -> tuple[Run, bool]:
        """Queue the child run, unless ``parent_run_id`` started one under ``child_key``
        before: then that one (True when this call created it). A child created while its
        parent is being cancelled is cancelled at once (unless it is to be abandoned)."""
        now = self.now()

        def work(tx: Tx) -> tuple[Run, bool]:
            inserted = tx.one(
                "insert_child_run",
                run_id=run_id,
                workflow_id=workflow_id,
                input=dumps(input),
                user_id=user_id,
                parent_run_id=parent_run_id,
                child_key=child_key,
                on_parent_cancel=on_parent_cancel,
                version=version,
                now=now,
            )
            row = tx.one("child_by_key", parent_run_id=parent_run_id, child_key=child_key)
            if row is None:  # the run id was taken by a run that is not this parent's child
                row = tx.one("get_run", run_id=run_id)
                assert row is not None
                return run_from_row(row), False
            if inserted is not None:
                parent = tx.one("get_run", run_id=parent_run_id)
                if parent is not None and parent["cancel_requested"]:
                    self._cancel_children(tx, parent_run_id, now)
                    row = tx.one("get_run", run_id=run_id)
                    assert row is not None
                tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
            return run_from_row(row), inserted is not None

        run, created = self._transact(work)
        if created:
            self._runs_queued()
        return run, created

    def child_runs(self, parent_run_id: str) -> list[Run]:
        """The runs ``parent_run_id`` started with ``ctx.start_child``, oldest first."""
        rows = self._transact(
            lambda tx: tx.all("child_runs", parent_run_id=parent_run_id), write=False
        )
        return [run_from_row(r) for r in rows]

    def _cancel_children(self, tx: Tx, parent_run_id: str, now: float | None) -> None:
        """Ask the children of a cancelled run to stop, and theirs, in ``tx``: a queued or
        waiting one ends at once, a running one at its next task call."""
        todo = [parent_run_id]
        while todo:
            parent = todo.pop()
            for child in tx.all("children_to_cancel", parent_run_id=parent):
                tx.one(
                    "request_run_cancel", run_id=child["run_id"], error=dumps(CANCELLED), now=now
                )
                todo.append(child["run_id"])

    def _wake_parent(self, tx: Tx, run: Run, now: float | None) -> bool:
        """``run`` (a child) has ended: wake its parent if it waits for it, in ``tx``."""
        if run.parent_run_id is None:
            return False
        row = tx.one(
            "wake_parent",
            parent_run_id=run.parent_run_id,
            topic=waiting_topic(run.run_id),
            now=now,
        )
        if row is None or not row["woke"]:
            return False
        tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
        return True

    def _wake_for_child(self, tx: Tx, run_id: str, topic: str, now: float | None) -> bool:
        """As ``run_id`` suspends waiting on a child (``topic``): wake it if the child has
        ended already, in ``tx``."""
        woke = tx.one(
            "wake_for_child",
            run_id=run_id,
            topic=topic,
            child_run_id=topic.removeprefix(CHILD_TOPIC),
            now=now,
        )
        if woke is None:
            return False
        tx.run("notify", channel=RUNS_CHANNEL, payload="queued")
        return True
