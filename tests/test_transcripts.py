"""The scripted agent's transcripts (longcall.testing): kept beside the job table, on SQLite
and PostgreSQL alike, outside the store's contract."""

from __future__ import annotations

import pytest

from longcall.core.clock import FakeClock
from longcall.errors import StoreError
from longcall.store import Store
from longcall.testing.transcripts import Transcripts


@pytest.fixture
def transcripts(store: Store) -> Transcripts:
    return Transcripts(store)


def test_a_second_transcripts_finds_the_tables_the_first_made(store: Store) -> None:
    """The first Transcripts on a database makes its tables; another (a second agent, another
    process) finds them and reads the same sessions."""
    first = Transcripts(store)
    first.ensure_session("s", app_name="app", user_id="u")
    first.append("s", [("inv", "user", {"text": "hi"}, None)])
    second = Transcripts(store)
    assert [e.content for e in second.events("s")] == [{"text": "hi"}]


def test_a_scripted_session_id_stays_with_its_first_user(transcripts: Transcripts) -> None:
    """ensure_session answers whose the session is; another user reads none of its events."""
    assert transcripts.ensure_session("s", app_name="app", user_id="ana") == "ana"
    assert transcripts.ensure_session("s", app_name="app", user_id="bob") == "ana"
    assert transcripts.owner("s") == "ana" and transcripts.owner("nope") is None
    transcripts.append("s", [("inv", "user", {"text": "hi"}, None)])
    assert len(transcripts.events("s", user_id="ana")) == 1
    assert transcripts.events("s", user_id="bob") == []
    assert transcripts.events("nope", user_id="bob") == []


def test_session_events_append_in_order(transcripts: Transcripts, clock: FakeClock) -> None:
    """Session events get consecutive sequence numbers and read back in order."""
    assert transcripts.exists("s") is False
    transcripts.ensure_session("s", app_name="app", user_id="u")
    transcripts.ensure_session("s", app_name="other", user_id="other")
    assert transcripts.exists("s") is True
    seqs = transcripts.append(
        "s",
        [
            ("inv1", "user", {"text": "export please"}, None),
            ("inv1", "agent", {"call": {"id": "c1", "name": "export"}}, None),
        ],
    )
    assert seqs == [1, 2]
    events = transcripts.events("s")
    assert [(e.seq, e.invocation_id, e.author) for e in events] == [
        (1, "inv1", "user"),
        (2, "inv1", "agent"),
    ]
    assert events[0].content == {"text": "export please"}
    assert events[0].created_at == clock.now()
    assert [e.seq for e in transcripts.events("s", after=1)] == [2]


def test_a_calls_final_response_is_appended_once(transcripts: Transcripts) -> None:
    """A second final response for the same call is skipped (None); other events still land."""
    transcripts.ensure_session("s", app_name="app", user_id="u")
    assert transcripts.has_final_response("s", "c1") is False
    first = transcripts.append(
        "s",
        [
            ("inv2", "user", {"response": {"id": "c1", "status": "running"}}, None),
            ("inv2", "user", {"response": {"id": "c1", "status": "succeeded"}}, "c1"),
            ("inv2", "user", {"response": {"id": "c1", "status": "succeeded"}}, "c1"),
        ],
    )
    assert first == [1, 2, None]
    assert transcripts.has_final_response("s", "c1") is True
    assert transcripts.has_final_response("s", "c2") is False
    second = transcripts.append(
        "s",
        [
            ("inv3", "user", {"response": {"id": "c1", "status": "failed"}}, "c1"),
            ("inv3", "user", {"response": {"id": "c2", "status": "succeeded"}}, "c2"),
        ],
    )
    assert second == [None, 3]
    assert [e.seq for e in transcripts.events("s")] == [1, 2, 3]
    assert transcripts.has_final_response("s", "c2") is True
    # Final responses are per session: another session's c1 is its own call.
    transcripts.ensure_session("t", app_name="app", user_id="u")
    assert transcripts.append("t", [("inv", "user", {}, "c1")]) == [1]


def test_appending_to_an_unknown_session_is_refused(transcripts: Transcripts) -> None:
    """append on a session that does not exist raises StoreError."""
    with pytest.raises(StoreError, match="no session 'ghost'"):
        transcripts.append("ghost", [("inv", "user", {}, None)])
    assert transcripts.events("ghost") == []
