-- Remote MCP tasks that local jobs wait on (longcall.mcp.remote), PostgreSQL. Not part of the
-- job table's schema: made on first use, beside it, in the same database.

-- name: mcpc_lock
-- Two processes making the table at once would collide in PostgreSQL's catalog.
SELECT pg_advisory_xact_lock(hashtext('longcall.mcp.remote'));

-- name: mcpc_create
-- One row per local job waiting on a remote task; the row goes when the job is answered.
-- next_poll_at doubles as the claim: a poller pushes it past its lease before polling.
CREATE TABLE IF NOT EXISTS lc_mcp_remote_tasks (
    job_id          TEXT PRIMARY KEY,
    server          TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    next_poll_at    DOUBLE PRECISION NOT NULL,
    polls           INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    status_message  TEXT,
    answer          TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    updated_at      DOUBLE PRECISION NOT NULL
);

-- name: mcpc_insert
INSERT INTO lc_mcp_remote_tasks (job_id, server, task_id, next_poll_at, status_message,
                                 answer, created_at, updated_at)
VALUES (%(job_id)s, %(server)s, %(task_id)s, lc_now(%(now)s) + %(delay)s, %(status_message)s,
        %(answer)s, lc_now(%(now)s), lc_now(%(now)s))
ON CONFLICT (job_id) DO NOTHING;

-- name: mcpc_claim
-- SKIP LOCKED: pollers claiming at once take different rows instead of waiting on each other.
UPDATE lc_mcp_remote_tasks t
SET next_poll_at = lc_now(%(now)s) + %(lease)s, updated_at = lc_now(%(now)s)
FROM (SELECT job_id FROM lc_mcp_remote_tasks WHERE next_poll_at <= lc_now(%(now)s)
      ORDER BY next_poll_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due
WHERE t.job_id = due.job_id
RETURNING t.job_id, t.server, t.task_id, t.polls, t.failures, t.answer, t.status_message;

-- name: mcpc_reschedule
UPDATE lc_mcp_remote_tasks
SET next_poll_at = lc_now(%(now)s) + %(delay)s, polls = %(polls)s, failures = %(failures)s,
    status_message = COALESCE(%(status_message)s, status_message), updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s;

-- name: mcpc_delete
DELETE FROM lc_mcp_remote_tasks WHERE job_id = %(job_id)s;

-- name: mcpc_get
SELECT job_id, server, task_id, next_poll_at, polls, failures, status_message, updated_at
FROM lc_mcp_remote_tasks WHERE job_id = %(job_id)s;
