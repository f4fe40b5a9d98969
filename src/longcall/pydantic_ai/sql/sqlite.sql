-- pydantic-ai sessions (longcall.pydantic_ai), SQLite. Not part of the job table's schema: made
-- on first use, beside it, in the same database.

-- name: pai_lock
-- Nothing to take: SQLite runs one writing transaction at a time.
SELECT 1;

-- name: pai_create_messages
-- One pydantic-ai ModelMessage per row, as ModelMessagesTypeAdapter dumps a one-item list.
CREATE TABLE IF NOT EXISTS lc_pai_messages (
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    run_id      TEXT,
    message     TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, seq)
);

-- name: pai_create_calls
-- Each long-running call a session made: open (awaiting its deferred result), noted (answered
-- for now with a pending note or progress) or answered (its closing response is in).
CREATE TABLE IF NOT EXISTS lc_pai_calls (
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    run_id      TEXT,
    job_id      TEXT,
    state       TEXT NOT NULL CHECK (state IN ('open', 'noted', 'answered')),
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, call_id)
);

-- name: pai_messages
SELECT seq, message FROM lc_pai_messages
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id ORDER BY seq;

-- name: pai_insert_message
INSERT INTO lc_pai_messages (app_name, user_id, session_id, seq, run_id, message, created_at)
VALUES (:app_name, :user_id, :session_id, :seq, :run_id, :message, :now);

-- name: pai_calls
SELECT call_id, tool_name, run_id, job_id, state FROM lc_pai_calls
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id;

-- name: pai_insert_call
INSERT INTO lc_pai_calls (app_name, user_id, session_id, call_id, tool_name, run_id, job_id, state,
                          created_at, updated_at)
VALUES (:app_name, :user_id, :session_id, :call_id, :tool_name, :run_id, :job_id, 'open',
        :now, :now)
ON CONFLICT (app_name, user_id, session_id, call_id) DO NOTHING;

-- name: pai_set_call_state
-- An answered call stays answered: its closing response is in the history once.
UPDATE lc_pai_calls SET state = :state, updated_at = :now
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND call_id = :call_id AND state <> 'answered';

-- name: pai_call_answered
SELECT 1 AS answered FROM lc_pai_calls
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND call_id = :call_id AND state = 'answered';
