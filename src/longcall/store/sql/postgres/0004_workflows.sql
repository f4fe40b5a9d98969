-- longcall schema 4 (PostgreSQL): durable workflow runs, their task checkpoints, interrupts and events.

-- A workflow run: its input, where it stands, and (for background runs) who holds it.
CREATE TABLE lc_runs (
    run_id           TEXT PRIMARY KEY,
    workflow_id      TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'waiting_input', 'completed',
                                       'failed', 'cancelled')),
    input            JSONB NOT NULL DEFAULT 'null',
    result           JSONB,
    error            JSONB,
    state            JSONB NOT NULL DEFAULT '{}',
    user_id          TEXT,
    job_id           TEXT,
    idempotency_key  TEXT UNIQUE,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 0,
    timeout_secs     DOUBLE PRECISION,
    errors           JSONB NOT NULL DEFAULT '[]',
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    available_at     DOUBLE PRECISION,
    holder           TEXT,
    lease_expires_at DOUBLE PRECISION,
    event_seq        INTEGER NOT NULL DEFAULT 0,
    created_at       DOUBLE PRECISION NOT NULL,
    updated_at       DOUBLE PRECISION NOT NULL,
    finished_at      DOUBLE PRECISION
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
    ok          BOOLEAN NOT NULL,
    result      JSONB,
    changes     JSONB NOT NULL DEFAULT '[]',
    attempts    INTEGER NOT NULL,
    started_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, position)
);

-- Questions a run asked (or answers given ahead of them), by continuation key.
CREATE TABLE lc_run_interrupts (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    prompt      TEXT,
    schema      JSONB,
    value       JSONB,
    answered    BOOLEAN NOT NULL DEFAULT FALSE,
    error       TEXT,
    asked_at    DOUBLE PRECISION,
    answered_at DOUBLE PRECISION,
    PRIMARY KEY (run_id, key)
);

-- What a run emitted; origin makes an emit replayed on resume a no-op.
CREATE TABLE lc_run_events (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    data        JSONB NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, origin)
);
