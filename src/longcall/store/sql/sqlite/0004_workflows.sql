-- longcall schema 4 (SQLite): durable workflow runs, their task checkpoints, interrupts and events.

-- A workflow run: its input, where it stands, and (for background runs) who holds it.
CREATE TABLE lc_runs (
    run_id           TEXT PRIMARY KEY,
    workflow_id      TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'waiting_input', 'completed',
                                       'failed', 'cancelled')),
    input            TEXT NOT NULL DEFAULT 'null',
    result           TEXT,
    error            TEXT,
    state            TEXT NOT NULL DEFAULT '{}',
    user_id          TEXT,
    job_id           TEXT,
    idempotency_key  TEXT UNIQUE,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 0,
    timeout_secs     REAL,
    errors           TEXT NOT NULL DEFAULT '[]',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    available_at     REAL,
    holder           TEXT,
    lease_expires_at REAL,
    event_seq        INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    finished_at      REAL
);
-- Workers claim queued runs oldest first, and take over runs whose holder went quiet.
CREATE INDEX lc_runs_queued ON lc_runs (available_at) WHERE status = 'queued';
CREATE INDEX lc_runs_leased ON lc_runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX lc_runs_created ON lc_runs (created_at, run_id);

-- One row per task call, committed before the call returns: the run's checkpoints.
CREATE TABLE lc_run_steps (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    name        TEXT NOT NULL,
    args_hash   TEXT NOT NULL,
    ok          INTEGER NOT NULL,
    result      TEXT,
    changes     TEXT NOT NULL DEFAULT '[]',
    attempts    INTEGER NOT NULL,
    started_at  REAL NOT NULL,
    finished_at REAL NOT NULL,
    PRIMARY KEY (run_id, position)
);

-- Questions a run asked (or answers given ahead of them), by continuation key.
CREATE TABLE lc_run_interrupts (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    prompt      TEXT,
    schema      TEXT,
    value       TEXT,
    answered    INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    asked_at    REAL,
    answered_at REAL,
    PRIMARY KEY (run_id, key)
);

-- What a run emitted; origin makes an emit replayed on resume a no-op.
CREATE TABLE lc_run_events (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, origin)
);
