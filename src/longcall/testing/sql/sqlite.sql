-- The scripted agent's sessions (longcall.testing.transcripts), SQLite. Not part of the job
-- table's schema: made on first use, beside it, in the same database.

-- name: transcripts_lock
-- Nothing to take: SQLite runs one writing transaction at a time.
SELECT 1;

-- name: transcripts_create_sessions
CREATE TABLE IF NOT EXISTS lc_scripted_sessions (
    session_id  TEXT PRIMARY KEY,
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    event_seq   INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL
);

-- name: transcripts_create_events
CREATE TABLE IF NOT EXISTS lc_scripted_events (
    session_id     TEXT NOT NULL REFERENCES lc_scripted_sessions (session_id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    invocation_id  TEXT NOT NULL,
    author         TEXT NOT NULL,
    content        TEXT NOT NULL,
    response_to    TEXT,
    final          INTEGER NOT NULL DEFAULT 0,
    created_at     REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- name: transcripts_create_final_index
-- A call's closing response is appended once, whatever retries the deliverer makes.
CREATE UNIQUE INDEX IF NOT EXISTS lc_scripted_final_response
    ON lc_scripted_events (session_id, response_to) WHERE final = 1;

-- name: transcripts_insert_session
INSERT INTO lc_scripted_sessions (session_id, app_name, user_id, created_at)
VALUES (:session_id, :app_name, :user_id, :now)
ON CONFLICT (session_id) DO NOTHING;

-- name: transcripts_get_session
SELECT * FROM lc_scripted_sessions WHERE session_id = :session_id;

-- name: transcripts_bump_seq
UPDATE lc_scripted_sessions SET event_seq = event_seq + 1 WHERE session_id = :session_id
RETURNING event_seq;

-- name: transcripts_insert_event
INSERT INTO lc_scripted_events (session_id, seq, invocation_id, author, content, response_to,
                                final, created_at)
VALUES (:session_id, :seq, :invocation_id, :author, :content, :response_to, :final, :now);

-- name: transcripts_events
SELECT * FROM lc_scripted_events WHERE session_id = :session_id AND seq > :after ORDER BY seq;

-- name: transcripts_has_final_response
SELECT 1 FROM lc_scripted_events WHERE session_id = :session_id AND response_to = :call_id
  AND final = 1;
