-- Remote MCP tasks that local jobs wait on (longcall.mcp.remote), SQLite. Not part of the job
-- table's schema: made on first use, beside it, in the same database.

-- name: mcpc_lock
-- Nothing to take: SQLite runs one writing transaction at a time.
SELECT 1;

-- name: mcpc_create
-- One row per local job waiting on a remote task; the row goes when the job is answered.
-- next_poll_at doubles as the claim: a poller pushes it past its lease before polling.
CREATE TABLE IF NOT EXISTS lc_mcp_remote_tasks (
    job_id          TEXT PRIMARY KEY,
    server          TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    next_poll_at    REAL NOT NULL,
    polls           INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    status_message  TEXT,
    answer          TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);

-- name: mcpc_insert
INSERT INTO lc_mcp_remote_tasks (job_id, server, task_id, next_poll_at, status_message,
                                 answer, created_at, updated_at)
VALUES (:job_id, :server, :task_id, :now + :delay, :status_message, :answer, :now, :now)
ON CONFLICT (job_id) DO NOTHING;

-- name: mcpc_claim
UPDATE lc_mcp_remote_tasks SET next_poll_at = :now + :lease, updated_at = :now
WHERE job_id IN (SELECT job_id FROM lc_mcp_remote_tasks WHERE next_poll_at <= :now
                 ORDER BY next_poll_at LIMIT :limit)
RETURNING job_id, server, task_id, polls, failures, answer, status_message;

-- name: mcpc_reschedule
UPDATE lc_mcp_remote_tasks
SET next_poll_at = :now + :delay, polls = :polls, failures = :failures,
    status_message = COALESCE(:status_message, status_message), updated_at = :now
WHERE job_id = :job_id;

-- name: mcpc_delete
DELETE FROM lc_mcp_remote_tasks WHERE job_id = :job_id;

-- name: mcpc_get
SELECT job_id, server, task_id, next_poll_at, polls, failures, status_message, updated_at
FROM lc_mcp_remote_tasks WHERE job_id = :job_id;
