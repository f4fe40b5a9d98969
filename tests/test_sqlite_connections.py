"""SQLite's per-thread connections: each lives as long as its thread, or its store."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

import pytest

from longcall.core.clock import SystemClock
from longcall.store.sqlite import SqliteStore

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts file descriptors in /proc/self/fd"
)


def open_on(path: Path) -> int:
    """How many file descriptors of this process are open on ``path`` (not its -wal/-shm)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the descriptor listdir itself used
            continue
        count += target == str(path)
    return count


def read_in_threads(store: SqliteStore, threads: int) -> None:
    """Each of ``threads`` threads, one after another, reads once and ends."""
    for _ in range(threads):
        thread = threading.Thread(target=store.schema_version)
        thread.start()
        thread.join()


def test_a_thread_that_ends_leaves_no_connection_open(tmp_path: Path) -> None:
    """Twenty threads that each read once and end hold no more descriptors than one did."""
    path = tmp_path / "threads.db"
    store = SqliteStore(path, SystemClock())
    try:
        store.schema_version()
        read_in_threads(store, 1)
        # SQLite keeps a closed connection's descriptor while another connection of the
        # process holds locks on the file (closing it would drop them), and reuses it.
        after_one = open_on(path)
        read_in_threads(store, 20)
        assert open_on(path) == after_one
    finally:
        store.close()
    assert open_on(path) == 0


def test_a_store_dropped_without_close_closes_its_connections(tmp_path: Path) -> None:
    """A store garbage-collected unclosed closes its connections, without a ResourceWarning."""
    path = tmp_path / "dropped.db"
    store = SqliteStore(path, SystemClock())
    store.schema_version()
    assert open_on(path) == 1
    del store
    gc.collect()
    assert open_on(path) == 0
