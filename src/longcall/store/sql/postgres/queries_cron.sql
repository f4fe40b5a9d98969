-- Cron schedules (schema 4): the schedule row and its claimed occurrences (lc_cron_fires).
-- Every name here exists in sqlite/queries_cron.sql too.

-- name: insert_cron
INSERT INTO lc_cron (cron_id, name, workflow_id, expression, timezone, input,
                     concurrency_policy, misfire_policy, catch_up_max, paused, next_fire_at,
                     user_id, created_at, updated_at, queue_name)
VALUES (%(cron_id)s, %(name)s, %(workflow_id)s, %(expression)s, %(timezone)s,
        %(input)s::jsonb, %(concurrency_policy)s, %(misfire_policy)s, %(catch_up_max)s,
        %(paused)s, %(next_fire_at)s, %(user_id)s, lc_now(%(now)s), lc_now(%(now)s), %(queue_name)s)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get_cron
SELECT * FROM lc_cron WHERE cron_id = %(cron_id)s;

-- name: get_cron_by_name
SELECT * FROM lc_cron WHERE name = %(name)s;

-- name: lock_cron
-- The schedule row, held until the transaction ends (an edit, a trigger).
SELECT * FROM lc_cron WHERE cron_id = %(cron_id)s FOR UPDATE;

-- name: list_cron
-- By name; ``after`` is the name of the last schedule of the previous page.
SELECT * FROM lc_cron
WHERE (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
  AND (%(workflow_id)s::text IS NULL OR workflow_id = %(workflow_id)s)
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s)
  AND (%(after)s::text IS NULL OR name > %(after)s)
ORDER BY name
LIMIT %(limit)s;

-- name: update_cron
UPDATE lc_cron SET name = %(name)s, workflow_id = %(workflow_id)s,
                   expression = %(expression)s, timezone = %(timezone)s,
                   input = %(input)s::jsonb, concurrency_policy = %(concurrency_policy)s,
                   misfire_policy = %(misfire_policy)s, catch_up_max = %(catch_up_max)s,
                   paused = %(paused)s, next_fire_at = %(next_fire_at)s,
                   user_id = %(user_id)s, updated_at = lc_now(%(now)s),
                   queue_name = %(queue_name)s
WHERE cron_id = %(cron_id)s
RETURNING *;

-- name: delete_cron
DELETE FROM lc_cron WHERE cron_id = %(cron_id)s;

-- name: due_crons
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
-- Schedules whose next occurrence has come; a schedule another scheduler holds is skipped.
SELECT * FROM lc_cron
WHERE NOT paused AND next_fire_at <= lc_now(%(now)s)
ORDER BY next_fire_at, cron_id
LIMIT {limit}
FOR UPDATE SKIP LOCKED;

-- name: next_cron_due
SELECT MIN(next_fire_at) AS at FROM lc_cron WHERE NOT paused;

-- name: cron_active_runs
SELECT COUNT(*) AS n FROM lc_runs
WHERE cron_id = %(cron_id)s AND status IN ('queued', 'running', 'waiting_input');

-- name: claim_cron_fire
-- The once-only claim of one occurrence: a second claim of the same (cron_id, fire_at) inserts
-- nothing (a concurrent one waits for the first one's commit on the primary key).
INSERT INTO lc_cron_fires (cron_id, fire_at, run_id, outcome, created_at)
VALUES (%(cron_id)s, %(fire_at)s, %(run_id)s, %(outcome)s, lc_now(%(now)s))
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get_cron_fire
SELECT * FROM lc_cron_fires WHERE cron_id = %(cron_id)s AND fire_at = %(fire_at)s;

-- name: cron_fired
UPDATE lc_cron SET next_fire_at = %(next_fire_at)s,
                   last_fire_at = CASE
                       WHEN %(last_fire_at)s::float8 IS NULL THEN last_fire_at
                       ELSE GREATEST(COALESCE(last_fire_at, %(last_fire_at)s), %(last_fire_at)s)
                   END,
                   execution_count = execution_count + %(started)s
WHERE cron_id = %(cron_id)s;

-- name: cron_fires
-- A schedule's claimed occurrences, newest first; ``before`` is the last fire_at of a page.
SELECT * FROM lc_cron_fires
WHERE cron_id = %(cron_id)s AND (%(before)s::float8 IS NULL OR fire_at < %(before)s)
ORDER BY fire_at DESC
LIMIT %(limit)s;

-- name: prune_cron_fires
DELETE FROM lc_cron_fires WHERE created_at < %(before)s;
