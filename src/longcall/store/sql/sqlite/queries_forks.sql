-- Forks (schema 22): a new run that starts from a copy of another run's first steps.
-- Every name here exists in postgres/queries_forks.sql too.

-- name: last_position
SELECT COALESCE(MAX(position), 0) AS last FROM lc_run_steps WHERE run_id = :run_id;

-- name: insert_fork
-- Queued for a worker, as submit_run queues a run; the original's owner, retries, timeout,
-- queue and priority (a fork counts against its queue's limits as the original did; its
-- dedupe id is not copied: the original may still hold it).
INSERT INTO lc_runs (run_id, workflow_id, status, input, user_id, max_retries, timeout_secs,
                     available_at, executions, created_at, updated_at, forked_from, forked_step,
                     version, queue_name, priority)
SELECT :run_id, workflow_id, 'queued', :input, user_id, max_retries, timeout_secs, :now, 0,
       :now, :now, run_id, :step,
       :version, queue_name, priority
FROM lc_runs WHERE run_id = :from_run_id
RETURNING *;

-- name: copy_steps
-- The checkpoints before the fork's step, as they were recorded (a failed one included).
INSERT INTO lc_run_steps (run_id, position, name, args_hash, ok, result, changes, attempts,
                          started_at, finished_at)
SELECT :run_id, position, name, args_hash, ok, result, changes, attempts, started_at,
       finished_at
FROM lc_run_steps WHERE run_id = :from_run_id AND position < :step;
