-- The workers alive and the workflows each can run (schema 6).
-- Every name here exists in sqlite/queries_workers.sql too.

-- name: beat_worker
-- A worker's heartbeat: its row, made on its first beat, good until expires_at.
INSERT INTO lc_workers (worker_id, workflows, started_at, heartbeat_at, expires_at)
VALUES (%(worker_id)s, %(workflows)s::jsonb, lc_now(%(now)s), lc_now(%(now)s),
        lc_now(%(now)s) + %(ttl)s)
ON CONFLICT (worker_id) DO UPDATE SET
    workflows = excluded.workflows,
    heartbeat_at = excluded.heartbeat_at,
    expires_at = excluded.expires_at;

-- name: prune_workers
-- Rows of workers that died without deleting theirs, once they are long out of date.
DELETE FROM lc_workers WHERE expires_at < lc_now(%(now)s) - %(keep)s;

-- name: forget_worker
DELETE FROM lc_workers WHERE worker_id = %(worker_id)s;

-- name: live_workers
SELECT * FROM lc_workers WHERE expires_at > lc_now(%(now)s) ORDER BY started_at, worker_id;
