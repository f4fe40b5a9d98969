"""SQLite's group commit: writers of one process share a transaction, never each other's fate."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import longcall
from longcall import CallIds, JobState
from longcall.errors import AttachConflict, JobNotFound
from longcall.store.base import NewJob
from longcall.store.sqlite import SqliteStore


def test_concurrent_writers_each_get_their_own_result_and_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many threads write at once (so groups form); a write that fails is rolled back alone,
    its caller gets its error, and every other write is committed."""
    app = longcall.App(f"sqlite:///{tmp_path}/group.db")
    store = app.store
    sizes: list[int] = []
    run_group = SqliteStore._run_group

    def counted(self: SqliteStore, conn: object, tx: object, batch: list[object]) -> None:
        sizes.append(len(batch))
        run_group(self, conn, tx, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "_run_group", counted)
    outcomes: dict[str, object] = {}
    start = threading.Barrier(16)

    def writer(n: int) -> None:
        start.wait()
        for i in range(40):
            key = f"w{n}-{i}"
            try:
                if i % 10 == 9:
                    # The same (session, call) as job i-1 of this writer: refused.
                    ids = CallIds("a", "u", f"s{n}", f"c{n}-{i - 1}", "inv")
                    store.create_job(NewJob(key, "t", {}, ids, None), holder="h", dispatch_lease=0)
                elif i % 10 == 5:
                    store.finish(f"missing-{key}", JobState.SUCCEEDED, 1)
                else:
                    ids = CallIds("a", "u", f"s{n}", f"c{n}-{i}", "inv")
                    job, created = store.create_job(
                        NewJob(key, "t", {"i": i}, ids, None), holder="h", dispatch_lease=0
                    )
                    outcomes[key] = (job.job_id, created)
            except (AttachConflict, JobNotFound) as exc:
                outcomes[key] = type(exc).__name__

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = {k for k, v in outcomes.items() if isinstance(v, tuple)}
    assert len(created) == 16 * 32
    assert all(outcomes[k] == (k, True) for k in created)
    assert sum(v == "AttachConflict" for v in outcomes.values()) == 16 * 4
    assert sum(v == "JobNotFound" for v in outcomes.values()) == 16 * 4
    assert max(sizes) > 1, "no group formed: the test did not test grouping"
    assert sum(sizes) == 16 * 40
    # What the callers were told is what the database holds, after a fresh open.
    app.close()
    again = longcall.App(f"sqlite:///{tmp_path}/group.db")
    stored = {j.job_id for j in again.store.list_jobs(limit=10_000)}
    assert stored == created
    again.close()


@pytest.mark.parametrize("writers", [1, 8])
def test_a_failing_write_leaves_no_trace(tmp_path: Path, writers: int) -> None:
    """A write that raises after changing rows has its changes rolled back, grouped or not."""
    app = longcall.App(f"sqlite:///{tmp_path}/fail.db")
    store = app.store
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def broken(n: int) -> None:
        def work(tx: object) -> None:
            tx.run(  # type: ignore[attr-defined]
                "insert_token",
                token_id=f"t{n}",
                token_hash=f"h{n}",
                user_id="u",
                admin=False,
                now=1.0,
            )
            raise RuntimeError(f"boom {n}")

        start.wait()
        try:
            store._transact(work)
        except RuntimeError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=broken, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(str(e) for e in failures) == sorted(f"boom {n}" for n in range(writers))
    assert store.tokens() == []
    app.close()


def test_lease_and_dispatch_bookkeeping_commit_without_an_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With synchronous=FULL, the job row and its completion commit with SQLite's fsync;
    session leases and the note that a tool's body ran commit without one (all that a power
    cut can cost there is a retry); a group holding any write of the first kind is synced."""
    from longcall.core.jobs import SessionKey
    from longcall.store.sqlite import _Pending

    app = longcall.App(f"sqlite:///{tmp_path}/relaxed.db")  # FULL by default
    store = app.store
    levels: list[int] = []  # PRAGMA synchronous in force at each commit: 2 FULL, 1 NORMAL
    run_group = SqliteStore._run_group

    def recorded(self: SqliteStore, conn: Any, tx: object, batch: list[object]) -> None:
        run_group(self, conn, tx, batch)  # type: ignore[arg-type]
        levels.append(conn.execute("PRAGMA synchronous").fetchone()[0])

    monkeypatch.setattr(SqliteStore, "_run_group", recorded)
    session = SessionKey("a", "u", "s")
    ids = CallIds("a", "u", "s", "c", "inv")

    def level_of(write: Any) -> int:
        levels.clear()
        write()
        [level] = levels
        return level

    assert level_of(lambda: store.take_session(session, "h", kind="turn", ttl=60)) == 1
    assert level_of(lambda: store.renew_session(session, "h", ttl=60)) == 1
    new = NewJob("j", "t", {}, ids, None)
    assert level_of(lambda: store.create_job(new, holder="h", dispatch_lease=60)) == 2
    assert level_of(lambda: store.finish_dispatch("j", "started")) == 1
    assert level_of(lambda: store.release_session(session, "h")) == 1
    assert level_of(lambda: store.finish("j", JobState.SUCCEEDED, {"ok": 1})) == 2
    # One group, one commit: synced when any write in it asks for it.
    relaxed = _Pending(lambda tx: None, durable=False)
    durable = _Pending(lambda tx: None, durable=True)
    assert level_of(lambda: store._commit_group([relaxed, durable])) == 2
    assert level_of(lambda: store._commit_group([relaxed])) == 1
    app.close()

    normal = longcall.App(f"sqlite:///{tmp_path}/normal.db?synchronous=NORMAL")
    levels.clear()
    normal.store.create_job(new, holder="h", dispatch_lease=60)
    normal.store.take_session(session, "h", kind="turn", ttl=60)
    assert levels == [1, 1]  # NORMAL stays NORMAL
    normal.close()
