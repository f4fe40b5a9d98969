"""Helpers for tests of code that uses longcall: a fake clock, a scripted agent, a throwaway store.

::

    from longcall.testing import FakeClock, temp_app

    def test_report_expires():
        clock = FakeClock()
        with temp_app(clock=clock) as app:
            ...
            clock.advance(46 * 60)
            app.sweeper().sweep()
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from longcall.app import App
from longcall.core.clock import FakeClock
from longcall.testing.scripted import Rule, ScriptedAgent

__all__ = ["FakeClock", "Rule", "ScriptedAgent", "temp_app"]


@contextlib.contextmanager
def temp_app(url: str | None = None, **options: Any) -> Iterator[App]:
    """An :class:`App` on a fresh SQLite file (or ``url``) that is closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="longcall-") as tmp:
        app = App(url or f"sqlite:///{Path(tmp) / 'longcall.db'}", **options)
        try:
            yield app
        finally:
            app.close()
