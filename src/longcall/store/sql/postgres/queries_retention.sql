-- Retention: finished work removed once it is older than a cutoff, oldest first, at most
-- %(limit)s rows a statement (the pruner commits between batches, so the hot path never waits
-- long on SQLite's one writer). What may still change is never taken: a started job, a job
-- whose result waits for its delivery, a job with outbox work (a cancel hook) still to run,
-- a run not finished. Deleting a job or a run deletes its log, steps and interrupts with it
-- (ON DELETE CASCADE). Here the rows are taken FOR UPDATE SKIP LOCKED: a row another
-- transaction is changing is left for the next pass, and one that changed since the batch's
-- snapshot is taken only if it still qualifies.

-- name: prune_jobs
DELETE FROM lc_jobs WHERE job_id IN (
    SELECT job_id FROM lc_jobs
    WHERE created_at < (lc_now(%(now)s) - %(age)s) AND finished_at < (lc_now(%(now)s) - %(age)s)
      AND state <> 'started' AND delivery <> 'ready'
      AND NOT EXISTS (SELECT 1 FROM lc_outbox WHERE lc_outbox.job_id = lc_jobs.job_id)
    ORDER BY created_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
);

-- name: count_prunable_jobs
SELECT COUNT(*) AS n FROM lc_jobs
WHERE created_at < (lc_now(%(now)s) - %(age)s) AND finished_at < (lc_now(%(now)s) - %(age)s)
  AND state <> 'started' AND delivery <> 'ready'
  AND NOT EXISTS (SELECT 1 FROM lc_outbox WHERE lc_outbox.job_id = lc_jobs.job_id);

-- name: prune_runs
DELETE FROM lc_runs WHERE run_id IN (
    SELECT run_id FROM lc_runs
    WHERE created_at < (lc_now(%(now)s) - %(age)s) AND finished_at < (lc_now(%(now)s) - %(age)s)
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY created_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
);

-- name: count_prunable_runs
SELECT COUNT(*) AS n FROM lc_runs
WHERE created_at < (lc_now(%(now)s) - %(age)s) AND finished_at < (lc_now(%(now)s) - %(age)s)
  AND status IN ('completed', 'failed', 'cancelled');

-- name: prune_inbox
DELETE FROM lc_inbox WHERE (source, delivery_id) IN (
    SELECT source, delivery_id FROM lc_inbox WHERE received_at < (lc_now(%(now)s) - %(age)s)
    ORDER BY received_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
);

-- name: count_prunable_inbox
SELECT COUNT(*) AS n FROM lc_inbox WHERE received_at < (lc_now(%(now)s) - %(age)s);

-- name: prune_early_results
DELETE FROM lc_early_results WHERE job_id IN (
    SELECT job_id FROM lc_early_results WHERE received_at < (lc_now(%(now)s) - %(age)s)
    ORDER BY received_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
);

-- name: count_prunable_early_results
SELECT COUNT(*) AS n FROM lc_early_results WHERE received_at < (lc_now(%(now)s) - %(age)s);
