-- The workers alive and the workflows each can run (schema 6).
-- Every name here exists in postgres/queries_workers.sql too.

-- name: beat_worker
-- A worker's heartbeat: its row, made on its first beat, good until expires_at.
INSERT INTO lc_workers (worker_id, workflows, started_at, heartbeat_at, expires_at)
VALUES (:worker_id, :workflows, :now, :now, :now + :ttl)
ON CONFLICT (worker_id) DO UPDATE SET
    workflows = excluded.workflows,
    heartbeat_at = excluded.heartbeat_at,
    expires_at = excluded.expires_at;

-- name: prune_workers
-- Rows of workers that died without deleting theirs, once they are long out of date.
DELETE FROM lc_workers WHERE expires_at < :now - :keep;

-- name: forget_worker
DELETE FROM lc_workers WHERE worker_id = :worker_id;

-- name: live_workers
SELECT * FROM lc_workers WHERE expires_at > :now ORDER BY started_at, worker_id;
