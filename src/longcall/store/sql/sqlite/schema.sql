-- longcall schema for new installs (SQLite): the job table, its event log, the outbox,
-- session leases, runs, schedules; equal to applying every migration in order.

CREATE TABLE lc_jobs (
    job_id          TEXT PRIMARY KEY,
    tool_name       TEXT NOT NULL,
    args            TEXT NOT NULL DEFAULT '{}',
    app_name        TEXT,
    user_id         TEXT,
    session_id      TEXT,
    call_id         TEXT,
    invocation_id   TEXT,
    state           TEXT NOT NULL DEFAULT 'started'
                    CHECK (state IN ('started', 'succeeded', 'failed', 'expired', 'cancelled')),
    result          TEXT,
    pending_message TEXT,
    progress        TEXT,
    progress_seq    INTEGER NOT NULL DEFAULT 0,
    notify_seq      INTEGER NOT NULL DEFAULT 0,
    notified_seq    INTEGER NOT NULL DEFAULT 0,
    notified_at     REAL,
    event_seq       INTEGER NOT NULL DEFAULT 0,
    deadline_at     REAL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    finished_at     REAL,
    delivered_at    REAL,
    delivery        TEXT NOT NULL DEFAULT 'none'
                    CHECK (delivery IN ('none', 'ready', 'delivered', 'failed', 'orphaned')),
    available_at    REAL,
    claim_holder    TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    attached_at     REAL,  -- schema 6
    cancel_hook     INTEGER NOT NULL DEFAULT 1,  -- schema 7: its tool declared on_cancel
    claim_fence     INTEGER,  -- schema 10: the session fence of its claim
    pending_fields  TEXT,  -- schema 11: what the tool returned beside its message
    trace_context   TEXT  -- schema 15: the W3C trace context it was created in
);

-- Claims read only ready rows: the cost stays flat however many jobs are open.
CREATE INDEX lc_jobs_ready ON lc_jobs (available_at) WHERE delivery = 'ready';
-- The sweeper reads only open rows, oldest deadline first.
CREATE INDEX lc_jobs_deadline ON lc_jobs (deadline_at) WHERE state = 'started';
-- One job per function call: per (user, session, call) since schema 8, no user counting as ''.
CREATE UNIQUE INDEX lc_jobs_call ON lc_jobs (session_id, call_id, COALESCE(user_id, ''))
    WHERE call_id IS NOT NULL;
CREATE INDEX lc_jobs_created ON lc_jobs (created_at, job_id);
CREATE INDEX lc_jobs_state_created ON lc_jobs (state, created_at, job_id);

CREATE TABLE lc_job_events (
    job_id      TEXT NOT NULL REFERENCES lc_jobs (job_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- Work to hand to the outside after a commit: submit a job, ask for its cancellation.
CREATE TABLE lc_outbox (
    job_id       TEXT NOT NULL REFERENCES lc_jobs (job_id) ON DELETE CASCADE,
    kind         TEXT NOT NULL CHECK (kind IN ('dispatch', 'cancel')),
    available_at REAL NOT NULL,
    holder       TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    created_at   REAL NOT NULL,
    PRIMARY KEY (job_id, kind)
);
CREATE INDEX lc_outbox_available ON lc_outbox (available_at);

-- Whoever runs the agent on a session holds its lease: user turns and resumes alike.
-- A session is ADK's (app, user, session id): several apps may share the database.
CREATE TABLE lc_session_leases (
    app_name    TEXT NOT NULL DEFAULT '',
    user_id     TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL,
    holder      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    expires_at  REAL NOT NULL,
    fence       INTEGER NOT NULL DEFAULT 0,  -- schema 10: raised by every take
    PRIMARY KEY (app_name, user_id, session_id)
);

-- Deliveries from outside (schema 2).
CREATE TABLE lc_inbox (
    source       TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    received_at  REAL NOT NULL,
    PRIMARY KEY (source, delivery_id)
);
CREATE INDEX lc_inbox_job ON lc_inbox (job_id);

-- A terminal result for a job that does not exist yet; the job takes it when it is created.
CREATE TABLE lc_early_results (
    job_id       TEXT PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('succeeded', 'failed', 'cancelled')),
    result       TEXT,
    source       TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    received_at  REAL NOT NULL
);

-- Secrets that sign deliveries, per source; several at once while a sender rotates.
CREATE TABLE lc_webhook_secrets (
    source      TEXT NOT NULL,
    secret_id   TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (source, secret_id)
);

-- API bearer tokens, kept as a SHA-256 of the token; a user's token sees only that user's jobs.
CREATE TABLE lc_tokens (
    token_id    TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL UNIQUE,
    user_id     TEXT,
    admin       INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    revoked_at  REAL
);

-- Event streams follow changes in the order they were made (schema 3).
CREATE INDEX lc_jobs_updated ON lc_jobs (updated_at, job_id);

-- Workflow runs (schema 4).
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
    finished_at      REAL,
    wake_at          REAL,  -- schema 17: asleep in ctx.sleep (or ctx.recv) until then
    recv_topic       TEXT,  -- schema 17: the topic a run waiting in ctx.recv wants
    message_seq      INTEGER NOT NULL DEFAULT 0,
    parent_run_id    TEXT,  -- schema 18: the run whose ctx.start_child started this one
    child_key        TEXT,  -- schema 18: the key it was started under, unique per parent
    on_parent_cancel TEXT,  -- schema 18: 'cancel' or 'abandon' when the parent is cancelled
    version          TEXT NOT NULL DEFAULT '1',  -- schema 19: the workflow version that started it
    queue_name       TEXT,  -- schema 20: the named queue it was submitted to
    priority         INTEGER NOT NULL DEFAULT 0,  -- schema 20: within its queue, lower first
    dedupe_id        TEXT,  -- schema 20: unique among its queue's active runs
    forked_from      TEXT,  -- schema 22: the run this one was forked from (app.fork_run)
    forked_step      INTEGER  -- schema 22: and the step it executes from
);
-- Workers claim queued runs oldest first, and take over runs whose holder went quiet.
CREATE INDEX lc_runs_queued ON lc_runs (available_at, run_id) WHERE status = 'queued';
-- Its lease condition (schema 5) keeps statements that find a running run by id off it.
CREATE INDEX lc_runs_leased ON lc_runs (lease_expires_at)
    WHERE status = 'running' AND lease_expires_at IS NOT NULL;
CREATE INDEX lc_runs_created ON lc_runs (created_at, run_id);
-- Runs that share a concurrency key (a 'queue' schedule's) start one at a time, in order.
CREATE INDEX lc_runs_key ON lc_runs (concurrency_key, created_at) WHERE concurrency_key IS NOT NULL;
CREATE INDEX lc_runs_cron ON lc_runs (cron_id, status) WHERE cron_id IS NOT NULL;
-- A child run is started once per (parent, key) (schema 18); it also lists a run's children.
CREATE UNIQUE INDEX lc_runs_children ON lc_runs (parent_run_id, child_key)
    WHERE parent_run_id IS NOT NULL;

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

-- Messages sent to a run (app.send), kept until a recv of their topic takes them, in order.
CREATE TABLE lc_run_messages (
    run_id          TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    topic           TEXT NOT NULL,
    message         TEXT NOT NULL,
    idempotency_key TEXT,
    received_at     REAL,
    created_at      REAL NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, idempotency_key)
);
CREATE INDEX lc_run_messages_unread ON lc_run_messages (run_id, topic, seq)
    WHERE received_at IS NULL;

-- Values a run published (ctx.set_event), the latest by key, for app.get_event.
CREATE TABLE lc_run_values (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (run_id, key)
);

-- Durable streams a run writes (ctx.stream) and clients read live.
-- seq numbers a stream's items from 1; origin says which write made the item (the body's
-- position and count, or the task's position, execution and attempt), so a write replayed on
-- resume inserts nothing. The item of origin 'end' (its value NULL) closes the stream
-- (ctx.close_stream); a stream whose run has finished is ended too, with or without one.
CREATE TABLE lc_run_streams (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    value       TEXT,
    created_at  REAL NOT NULL,
    PRIMARY KEY (run_id, key, seq),
    UNIQUE (run_id, key, origin)
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

-- What the dashboard shows (schema 6).
-- A job's page links to the background runs doing its work.
CREATE INDEX lc_runs_job ON lc_runs (job_id) WHERE job_id IS NOT NULL;

-- Workers alive, and the workflows each can run: each renews its row as it sweeps, on the
-- database's clock, and deletes it as it stops. A queued run whose workflow no live worker
-- has registered waits for one that does.
CREATE TABLE lc_workers (
    worker_id    TEXT PRIMARY KEY,
    workflows    TEXT NOT NULL DEFAULT '[]',
    started_at   REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    expires_at   REAL NOT NULL
);

-- The dashboard's logins (schema 9): only the digest of the id in the browser's cookie; a
-- login is found only through a live token, so revoking the token ends it.
CREATE TABLE lc_logins (
    login_hash  TEXT PRIMARY KEY,
    token_id    TEXT NOT NULL REFERENCES lc_tokens (token_id) ON DELETE CASCADE,
    created_at  REAL NOT NULL,
    expires_at  REAL NOT NULL
);
CREATE INDEX lc_logins_expires ON lc_logins (expires_at);

-- Schema 14: listings, metrics and retention flat in the size of the tables.
CREATE INDEX lc_jobs_user_created ON lc_jobs (user_id, created_at, job_id);
-- Schema 16: a user's listing filtered by state, from one index.
CREATE INDEX lc_jobs_user_state_created ON lc_jobs (user_id, state, created_at, job_id);
CREATE INDEX lc_jobs_tool_created ON lc_jobs (tool_name, created_at, job_id);
CREATE INDEX lc_jobs_session_created ON lc_jobs (session_id, created_at, job_id);
-- Jobs by (state, delivery), kept as jobs change: GET /metrics reads these few rows instead of
-- counting the table. One writer at a time on SQLite, so the triggers add to the rows
-- directly.
CREATE TABLE lc_job_counts (
    state    TEXT NOT NULL,
    delivery TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (state, delivery)
) WITHOUT ROWID;
INSERT INTO lc_job_counts (state, delivery, n)
SELECT state, delivery, COUNT(*) FROM lc_jobs GROUP BY state, delivery;
CREATE TRIGGER lc_jobs_counted AFTER INSERT ON lc_jobs BEGIN
    INSERT INTO lc_job_counts (state, delivery, n) VALUES (NEW.state, NEW.delivery, 1)
    ON CONFLICT (state, delivery) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lc_jobs_recounted AFTER UPDATE OF state, delivery ON lc_jobs
WHEN OLD.state IS NOT NEW.state OR OLD.delivery IS NOT NEW.delivery BEGIN
    UPDATE lc_job_counts SET n = n - 1 WHERE state = OLD.state AND delivery = OLD.delivery;
    INSERT INTO lc_job_counts (state, delivery, n) VALUES (NEW.state, NEW.delivery, 1)
    ON CONFLICT (state, delivery) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lc_jobs_uncounted AFTER DELETE ON lc_jobs BEGIN
    UPDATE lc_job_counts SET n = n - 1 WHERE state = OLD.state AND delivery = OLD.delivery;
END;
-- The metrics read the runs not finished (by status, and the oldest queued) from this
-- index: as many entries as there are open runs, whatever the size of the table. Status
-- is not a key of it: a run looked up by id and status must keep to the primary key.
CREATE INDEX lc_runs_open ON lc_runs (available_at)
    WHERE status IN ('queued', 'running', 'waiting_input');
-- Retention (the worker's pruner, `longcall prune`): deliveries from outside and early results
-- are removed oldest first, a small batch at a time, through these.
CREATE INDEX lc_inbox_received ON lc_inbox (received_at);
CREATE INDEX lc_early_results_received ON lc_early_results (received_at);

-- longcall schema 20: named queues. A run submitted to a queue carries its name, its
-- priority (lower first) and an optional deduplication id. lc_queues keeps each queue's
-- limits, declared by the app (app.queue), so every worker enforces the same numbers; a
-- queue's claim locks its row, so its concurrency holds across processes and hosts. (The
-- columns of lc_runs are in its CREATE TABLE above.)
-- A queue's claim takes its queued runs by priority, then oldest first.
CREATE INDEX lc_runs_queue_queued ON lc_runs (queue_name, priority, available_at, run_id)
    WHERE status = 'queued' AND queue_name IS NOT NULL;
-- A queue's running runs, counted against its limits at every claim.
CREATE INDEX lc_runs_queue_running ON lc_runs (queue_name, holder)
    WHERE status = 'running' AND queue_name IS NOT NULL;
-- One active run (queued, running, waiting or asleep) per deduplication id and queue.
CREATE UNIQUE INDEX lc_runs_dedupe ON lc_runs (queue_name, dedupe_id)
    WHERE dedupe_id IS NOT NULL AND status IN ('queued', 'running', 'waiting_input');

CREATE TABLE lc_queues (
    name               TEXT PRIMARY KEY,
    concurrency        INTEGER,  -- running runs across every worker; NULL: no limit
    worker_concurrency INTEGER,  -- running runs one worker holds; NULL: no limit
    rate_limit         INTEGER,  -- claims per rate_period; NULL: no limit
    rate_period        REAL,
    priority           INTEGER NOT NULL DEFAULT 0,
    updated_at         REAL NOT NULL
);
-- The claims a rate-limited queue made within its period (older ones are pruned as it claims).
CREATE TABLE lc_queue_starts (
    queue_name TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    started_at REAL NOT NULL
);
CREATE INDEX lc_queue_starts_at ON lc_queue_starts (queue_name, started_at);
-- A cron schedule may submit its runs to a named queue.
ALTER TABLE lc_cron ADD COLUMN queue_name TEXT;
