-- Named queues (schema 20): their limits, and the claim that keeps to them.

-- name: get_queue
SELECT * FROM lc_queues WHERE name = %(name)s;

-- name: define_queue
-- The last definition wins: every worker reads the limits from here at each claim.
INSERT INTO lc_queues (name, concurrency, worker_concurrency, rate_limit, rate_period,
                       priority, updated_at)
VALUES (%(name)s, %(concurrency)s, %(worker_concurrency)s, %(rate_limit)s, %(rate_period)s,
        %(priority)s, lc_now(%(now)s))
ON CONFLICT (name) DO UPDATE SET
    concurrency = excluded.concurrency, worker_concurrency = excluded.worker_concurrency,
    rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,
    priority = excluded.priority, updated_at = excluded.updated_at;

-- name: queues
SELECT * FROM lc_queues ORDER BY name;

-- name: lock_queue
-- Held until the claim's transaction ends: claims of one queue take turns, on every host,
-- so each counts the runs the one before it started.
SELECT * FROM lc_queues WHERE name = %(name)s FOR UPDATE;

-- name: claim_queue_runs
-- Up to as many of the queue's runs as its limits leave room for (none past ``limit``), by
-- priority (lower first), then oldest first; each claim recorded for the rate limit, and the
-- claims older than the period pruned. Sent after lock_queue, in its transaction: a new
-- statement, so its snapshot has the claims committed before the lock was ours. The limits
-- are the locked row's, passed in (NULL: none). With ``registered``, as in claim_runs: only
-- runs of the (workflow, version) pairs the worker has registered.
WITH load AS (
    SELECT count(*) AS running,
           count(*) FILTER (WHERE holder LIKE %(mine)s ESCAPE '\') AS mine
    FROM lc_runs WHERE queue_name = %(name)s AND status = 'running'),
started AS (
    SELECT count(*) AS n FROM lc_queue_starts
    WHERE queue_name = %(name)s AND started_at > lc_now(%(now)s) - %(period)s::float8),
room AS (
    SELECT GREATEST(0, LEAST(%(limit)s::integer,
        COALESCE(%(concurrency)s::integer - load.running, %(limit)s::integer),
        COALESCE(%(worker_concurrency)s::integer - load.mine, %(limit)s::integer),
        COALESCE(%(rate_limit)s::integer - started.n, %(limit)s::integer))) AS n
    FROM load, started),
picked AS (
    SELECT run_id FROM lc_runs
    WHERE queue_name = %(name)s AND status = 'queued' AND available_at <= lc_now(%(now)s)
      /*if registered*/ AND (workflow_id, version) IN (SELECT w ->> 0, w ->> 1 FROM jsonb_array_elements(%(registered)s::jsonb) w)
    ORDER BY priority, available_at, run_id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE lc_runs SET status = 'running', holder = %(holder)s,
                       lease_expires_at = lc_now(%(now)s) + %(lease)s,
                       executions = executions + 1, updated_at = lc_now(%(now)s), wake_at = NULL,
                       recv_topic = NULL
    FROM picked WHERE lc_runs.run_id = picked.run_id
    RETURNING lc_runs.*),
pruned AS (
    DELETE FROM lc_queue_starts
    WHERE queue_name = %(name)s AND started_at <= lc_now(%(now)s) - %(period)s::float8),
recorded AS (
    INSERT INTO lc_queue_starts (queue_name, run_id, started_at)
    SELECT %(name)s, run_id, lc_now(%(now)s) FROM claimed
    WHERE %(period)s::float8 IS NOT NULL)
SELECT * FROM claimed;

-- name: active_dedupe
SELECT run_id FROM lc_runs
WHERE queue_name = %(name)s AND dedupe_id = %(dedupe_id)s
  AND status IN ('queued', 'running', 'waiting_input');

-- name: queue_depths
-- Runs not finished, by queue and status ('sleeping': queued with a wake-up time), and the
-- oldest queued run's creation time.
SELECT queue_name,
       CASE WHEN status = 'queued' AND (wake_at IS NOT NULL OR recv_topic IS NOT NULL)
            THEN 'sleeping' ELSE status END AS status,
       count(*) AS n, min(created_at) AS oldest
FROM lc_runs
WHERE queue_name IS NOT NULL AND status IN ('queued', 'running', 'waiting_input')
GROUP BY 1, 2;
