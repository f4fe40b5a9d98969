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

-- name: queue_load
-- A new statement after the lock, so its snapshot sees the claims committed before it.
SELECT count(*) AS running,
       count(*) FILTER (WHERE holder LIKE %(mine)s ESCAPE '\') AS mine,
       (SELECT count(*) FROM lc_queue_starts
        WHERE queue_name = %(name)s AND started_at > lc_now(%(now)s) - %(period)s) AS started
FROM lc_runs WHERE queue_name = %(name)s AND status = 'running';

-- name: prune_queue_starts
DELETE FROM lc_queue_starts
WHERE queue_name = %(name)s AND started_at <= lc_now(%(now)s) - %(period)s;

-- name: claim_queue_runs
-- Up to ``limit`` of the queue's runs, by priority (lower first), then oldest first.
WITH picked AS (
    SELECT run_id FROM lc_runs
    WHERE queue_name = %(name)s AND status = 'queued' AND available_at <= lc_now(%(now)s)
    ORDER BY priority, available_at, run_id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE lc_runs SET status = 'running', holder = %(holder)s,
                       lease_expires_at = lc_now(%(now)s) + %(lease)s,
                       executions = executions + 1, updated_at = lc_now(%(now)s), wake_at = NULL,
                       recv_topic = NULL
    FROM picked WHERE lc_runs.run_id = picked.run_id
    RETURNING lc_runs.*)
SELECT * FROM claimed;

-- name: record_queue_start
-- Each claim, for the queue's rate limit.
INSERT INTO lc_queue_starts (queue_name, run_id, started_at)
VALUES (%(name)s, %(run_id)s, lc_now(%(now)s));

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
