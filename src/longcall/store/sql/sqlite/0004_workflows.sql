-- longcall schema 4 (SQLite): durable workflow runs (their task checkpoints, interrupts and events) and cron schedules.

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
    cron_id          TEXT,
    concurrency_key  TEXT,
    idempotency_key  TEXT UNIQUE,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 0,
    timeout_secs     REAL,
    errors           TEXT NOT NULL DEFAULT '[]',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    available_at     REAL,
    holder           TEXT,
    lease_expires_at REAL,
    executions       INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    finished_at      REAL
);
-- Workers claim queued runs oldest first, and take over runs whose holder went quiet.
CREATE INDEX lc_runs_queued ON lc_runs (available_at, run_id) WHERE status = 'queued';
CREATE INDEX lc_runs_leased ON lc_runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX lc_runs_created ON lc_runs (created_at, run_id);
-- Runs that share a concurrency key (a 'queue' schedule's) start one at a time, in order.
CREATE INDEX lc_runs_key ON lc_runs (concurrency_key, created_at) WHERE concurrency_key IS NOT NULL;
CREATE INDEX lc_runs_cron ON lc_runs (cron_id, status) WHERE cron_id IS NOT NULL;

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

-- Cron schedules: a workflow started at each occurrence of an expression in a time zone.
CREATE TABLE lc_cron (
    cron_id            TEXT PRIMARY KEY,
    name               TEXT NOT NULL UNIQUE,
    workflow_id        TEXT NOT NULL,
    expression         TEXT NOT NULL,
    timezone           TEXT NOT NULL DEFAULT 'UTC',
    input              TEXT NOT NULL DEFAULT 'null',
    concurrency_policy TEXT NOT NULL DEFAULT 'skip'
                       CHECK (concurrency_policy IN ('skip', 'allow', 'queue')),
    misfire_policy     TEXT NOT NULL DEFAULT 'skip'
                       CHECK (misfire_policy IN ('skip', 'run_once', 'catch_up')),
    catch_up_max       INTEGER NOT NULL DEFAULT 0,
    paused             INTEGER NOT NULL DEFAULT 0,
    next_fire_at       REAL,
    last_fire_at       REAL,
    execution_count    INTEGER NOT NULL DEFAULT 0,
    user_id            TEXT,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL
);
CREATE INDEX lc_cron_due ON lc_cron (next_fire_at) WHERE paused = 0;

-- Each occurrence of a schedule is claimed once, by whichever scheduler gets there first.
CREATE TABLE lc_cron_fires (
    cron_id     TEXT NOT NULL REFERENCES lc_cron (cron_id) ON DELETE CASCADE,
    fire_at     REAL NOT NULL,
    run_id      TEXT,
    outcome     TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (cron_id, fire_at)
);
-- Old occurrences are pruned by age.
CREATE INDEX lc_cron_fires_created ON lc_cron_fires (created_at);
