-- The scripted agent's sessions (longcall.testing.transcripts), PostgreSQL. Not part of the job
-- table's schema: made on first use, beside it, in the same database.

-- name: transcripts_lock
-- Two processes making the tables at once would collide in PostgreSQL's catalog.
SELECT pg_advisory_xact_lock(hashtext('longcall.testing.transcripts'));

-- name: transcripts_create_sessions
CREATE TABLE IF NOT EXISTS lc_scripted_sessions (
    session_id  TEXT PRIMARY KEY,
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    event_seq   BIGINT NOT NULL DEFAULT 0,
    created_at  DOUBLE PRECISION NOT NULL
);

-- name: transcripts_create_events
CREATE TABLE IF NOT EXISTS lc_scripted_events (
    session_id     TEXT NOT NULL REFERENCES lc_scripted_sessions (session_id) ON DELETE CASCADE,
    seq            BIGINT NOT NULL,
    invocation_id  TEXT NOT NULL,
    author         TEXT NOT NULL,
    content        JSONB NOT NULL,
    response_to    TEXT,
    final          BOOLEAN NOT NULL DEFAULT false,
    created_at     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- name: transcripts_create_final_index
-- A call's closing response is appended once, whatever retries the deliverer makes.
CREATE UNIQUE INDEX IF NOT EXISTS lc_scripted_final_response
    ON lc_scripted_events (session_id, response_to) WHERE final;

-- name: transcripts_insert_session
INSERT INTO lc_scripted_sessions (session_id, app_name, user_id, created_at)
VALUES (%(session_id)s, %(app_name)s, %(user_id)s, lc_now(%(now)s))
ON CONFLICT (session_id) DO NOTHING;

-- name: transcripts_get_session
SELECT * FROM lc_scripted_sessions WHERE session_id = %(session_id)s;

-- name: transcripts_bump_seq
UPDATE lc_scripted_sessions SET event_seq = event_seq + 1 WHERE session_id = %(session_id)s
RETURNING event_seq;

-- name: transcripts_insert_event
INSERT INTO lc_scripted_events (session_id, seq, invocation_id, author, content, response_to,
                                final, created_at)
VALUES (%(session_id)s, %(seq)s, %(invocation_id)s, %(author)s, %(content)s::jsonb, %(response_to)s, %(final)s::boolean, lc_now(%(now)s));

-- name: transcripts_events
SELECT * FROM lc_scripted_events WHERE session_id = %(session_id)s AND seq > %(after)s ORDER BY seq;

-- name: transcripts_has_final_response
SELECT 1 FROM lc_scripted_events WHERE session_id = %(session_id)s AND response_to = %(call_id)s
  AND final;
