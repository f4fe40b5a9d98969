-- Retention: finished work removed once it is older than a cutoff, oldest first, at most
-- :limit rows a statement (the pruner commits between batches, so the hot path never waits
-- long on SQLite's one writer). What may still change is never taken: a started job, a job
-- whose result waits for its delivery, a job with outbox work (a cancel hook) still to run,
-- a run not finished. Deleting a job or a run deletes its log, steps and interrupts with it
-- (ON DELETE CASCADE).

-- name: prune_jobs
DELETE FROM lc_jobs WHERE job_id IN (
    SELECT job_id FROM lc_jobs
    WHERE created_at < (:now - :age) AND finished_at < (:now - :age)
      AND state <> 'started' AND delivery <> 'ready'
      AND NOT EXISTS (SELECT 1 FROM lc_outbox WHERE lc_outbox.job_id = lc_jobs.job_id)
    ORDER BY created_at
    LIMIT :limit
);

-- name: count_prunable_jobs
SELECT COUNT(*) AS n FROM lc_jobs
WHERE created_at < (:now - :age) AND finished_at < (:now - :age)
  AND state <> 'started' AND delivery <> 'ready'
  AND NOT EXISTS (SELECT 1 FROM lc_outbox WHERE lc_outbox.job_id = lc_jobs.job_id);

-- name: prune_runs
DELETE FROM lc_runs WHERE run_id IN (
    SELECT run_id FROM lc_runs
    WHERE created_at < (:now - :age) AND finished_at < (:now - :age)
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY created_at
    LIMIT :limit
);

-- name: count_prunable_runs
SELECT COUNT(*) AS n FROM lc_runs
WHERE created_at < (:now - :age) AND finished_at < (:now - :age)
  AND status IN ('completed', 'failed', 'cancelled');

-- name: prune_inbox
DELETE FROM lc_inbox WHERE (source, delivery_id) IN (
    SELECT source, delivery_id FROM lc_inbox WHERE received_at < (:now - :age)
    ORDER BY received_at
    LIMIT :limit
);

-- name: count_prunable_inbox
SELECT COUNT(*) AS n FROM lc_inbox WHERE received_at < (:now - :age);

-- name: prune_early_results
DELETE FROM lc_early_results WHERE job_id IN (
    SELECT job_id FROM lc_early_results WHERE received_at < (:now - :age)
    ORDER BY received_at
    LIMIT :limit
);

-- name: count_prunable_early_results
SELECT COUNT(*) AS n FROM lc_early_results WHERE received_at < (:now - :age);
