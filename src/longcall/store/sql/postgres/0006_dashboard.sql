-- longcall schema 6 (PostgreSQL): what the dashboard shows of a job and of the runs' workers.

-- When the job got both its session and its call id (unknown for jobs attached before this).
ALTER TABLE lc_jobs ADD COLUMN attached_at DOUBLE PRECISION;

-- A job's page links to the background runs doing its work.
CREATE INDEX lc_runs_job ON lc_runs (job_id) WHERE job_id IS NOT NULL;

-- Workers alive, and the workflows each can run: each renews its row as it sweeps, on the
-- database's clock, and deletes it as it stops. A queued run whose workflow no live worker
-- has registered waits for one that does.
CREATE TABLE lc_workers (
    worker_id    TEXT PRIMARY KEY,
    workflows    JSONB NOT NULL DEFAULT '[]',
    started_at   DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION NOT NULL
);
