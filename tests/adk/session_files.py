"""google-adk's SQLite session service, opened so that its leaked connection fails no test."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

from google.adk.sessions.sqlite_session_service import SqliteSessionService


def sqlite_session_service(path: Path) -> SqliteSessionService:
    """``SqliteSessionService(path)``, without the warning google-adk's constructor causes.

    On an existing file the constructor checks whether the schema needs migrating inside
    ``with sqlite3.connect(...) as conn``, which commits but never closes the connection
    (google-adk 2.13, ``_is_migration_needed``). From Python 3.13 an unclosed connection warns
    when it is collected; this suite turns warnings into errors, and the error would surface in
    whichever later test happens to collect it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        service = SqliteSessionService(str(path))
        gc.collect()
    return service
