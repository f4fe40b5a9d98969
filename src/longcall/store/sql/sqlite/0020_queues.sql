-- longcall schema 20: named queues. A run submitted to a queue carries its name, its
-- priority (lower first) and an optional deduplication id. lc_queues keeps each queue's
-- limits, declared by the app (app.queue), so every worker enforces the same numbers; a
-- queue's claim locks its row, so its concurrency holds across processes and hosts.
ALTER TABLE lc_runs ADD COLUMN queue_name TEXT;
ALTER TABLE lc_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lc_runs ADD COLUMN dedupe_id TEXT;
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
