-- Named queues (schema 20): their limits, and the claim that keeps to them.

-- name: get_queue
SELECT * FROM lc_queues WHERE name = :name;

-- name: define_queue
-- The last definition wins: every worker reads the limits from here at each claim.
INSERT INTO lc_queues (name, concurrency, worker_concurrency, rate_limit, rate_period,
                       priority, updated_at)
VALUES (:name, :concurrency, :worker_concurrency, :rate_limit, :rate_period,
        :priority, :now)
ON CONFLICT (name) DO UPDATE SET
    concurrency = excluded.concurrency, worker_concurrency = excluded.worker_concurrency,
    rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,
    priority = excluded.priority, updated_at = excluded.updated_at;

-- name: queues
SELECT * FROM lc_queues ORDER BY name;

-- name: lock_queue
-- SQLite has one writer: the claim's transaction (begun as a write) already takes turns.
SELECT * FROM lc_queues WHERE name = :name;

-- name: claim_queue_runs
-- Up to as many of the queue's runs as its limits leave room for (none past ``limit``), by
-- priority (lower first), then oldest first; each claim recorded for the rate limit (the
-- claim's holder is new: its runs are the ones just claimed), and the claims older than the
-- period pruned. The limits are the queue row's, passed in (NULL: none).
DELETE FROM lc_queue_starts WHERE queue_name = :name AND started_at <= :now - :period;

UPDATE lc_runs SET status = 'running', holder = :holder, lease_expires_at = :now + :lease,
                   executions = executions + 1, updated_at = :now, wake_at = NULL,
                   recv_topic = NULL
WHERE run_id IN (
    SELECT run_id FROM lc_runs
    WHERE queue_name = :name AND status = 'queued' AND available_at <= :now
      /*if registered*/ AND EXISTS (SELECT 1 FROM json_each(:registered) w WHERE json_extract(w.value, '$[0]') = workflow_id AND json_extract(w.value, '$[1]') = version)
    ORDER BY priority, available_at, run_id
    LIMIT max(0, min(:limit,
        coalesce(:concurrency - (SELECT count(*) FROM lc_runs
                                 WHERE queue_name = :name AND status = 'running'), :limit),
        coalesce(:worker_concurrency - (SELECT count(*) FROM lc_runs
                                        WHERE queue_name = :name AND status = 'running'
                                          AND holder LIKE :mine ESCAPE '\'), :limit),
        coalesce(:rate_limit - (SELECT count(*) FROM lc_queue_starts
                                WHERE queue_name = :name AND started_at > :now - :period),
                 :limit))))
RETURNING *;

INSERT INTO lc_queue_starts (queue_name, run_id, started_at)
SELECT :name, run_id, :now FROM lc_runs
WHERE queue_name = :name AND status = 'running' AND holder = :holder AND :period IS NOT NULL;

-- name: active_dedupe
SELECT run_id FROM lc_runs
WHERE queue_name = :name AND dedupe_id = :dedupe_id
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
