-- Cron schedules (schema 4): the schedule row and its claimed occurrences (lc_cron_fires).
-- Every name here exists in postgres/queries_cron.sql too. Write transactions are serialized
-- (BEGIN IMMEDIATE), so the row locks PostgreSQL takes are not needed here.

-- name: insert_cron
INSERT INTO lc_cron (cron_id, name, workflow_id, expression, timezone, input,
                     concurrency_policy, misfire_policy, catch_up_max, paused, next_fire_at,
                     user_id, created_at, updated_at, queue_name)
VALUES (:cron_id, :name, :workflow_id, :expression, :timezone, :input, :concurrency_policy,
        :misfire_policy, :catch_up_max, :paused, :next_fire_at, :user_id, :now, :now, :queue_name)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get_cron
SELECT * FROM lc_cron WHERE cron_id = :cron_id;

-- name: get_cron_by_name
SELECT * FROM lc_cron WHERE name = :name;

-- name: lock_cron
-- The schedule row (the write transaction already holds the database's one write lock).
SELECT * FROM lc_cron WHERE cron_id = :cron_id;

-- name: list_cron
-- By name; ``after`` is the name of the last schedule of the previous page.
SELECT * FROM lc_cron
WHERE (:user_id IS NULL OR user_id = :user_id)
  AND (:workflow_id IS NULL OR workflow_id = :workflow_id)
  AND (:paused IS NULL OR paused = :paused)
  AND (:after IS NULL OR name > :after)
ORDER BY name
LIMIT :limit;

-- name: update_cron
UPDATE lc_cron SET name = :name, workflow_id = :workflow_id, expression = :expression,
                   timezone = :timezone, input = :input,
                   concurrency_policy = :concurrency_policy, misfire_policy = :misfire_policy,
                   catch_up_max = :catch_up_max, paused = :paused,
                   next_fire_at = :next_fire_at, user_id = :user_id, updated_at = :now,
                   queue_name = :queue_name
WHERE cron_id = :cron_id
RETURNING *;

-- name: delete_cron
DELETE FROM lc_cron WHERE cron_id = :cron_id;

-- name: due_crons
-- Schedules whose next occurrence has come.
SELECT * FROM lc_cron
WHERE paused = 0 AND next_fire_at <= :now
ORDER BY next_fire_at, cron_id
LIMIT :limit;

-- name: next_cron_due
SELECT MIN(next_fire_at) AS at FROM lc_cron WHERE paused = 0;

-- name: cron_active_runs
SELECT COUNT(*) AS n FROM lc_runs
WHERE cron_id = :cron_id AND status IN ('queued', 'running', 'waiting_input');

-- name: claim_cron_fire
-- The once-only claim of one occurrence: a second claim of the same (cron_id, fire_at)
-- inserts nothing.
INSERT INTO lc_cron_fires (cron_id, fire_at, run_id, outcome, created_at)
VALUES (:cron_id, :fire_at, :run_id, :outcome, :now)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get_cron_fire
SELECT * FROM lc_cron_fires WHERE cron_id = :cron_id AND fire_at = :fire_at;

-- name: cron_fired
UPDATE lc_cron SET next_fire_at = :next_fire_at,
                   last_fire_at = CASE
                       WHEN :last_fire_at IS NULL THEN last_fire_at
                       ELSE MAX(COALESCE(last_fire_at, :last_fire_at), :last_fire_at)
                   END,
                   execution_count = execution_count + :started
WHERE cron_id = :cron_id;

-- name: cron_fires
-- A schedule's claimed occurrences, newest first; ``before`` is the last fire_at of a page.
SELECT * FROM lc_cron_fires
WHERE cron_id = :cron_id AND (:before IS NULL OR fire_at < :before)
ORDER BY fire_at DESC
LIMIT :limit;

-- name: prune_cron_fires
DELETE FROM lc_cron_fires WHERE created_at < :before;
