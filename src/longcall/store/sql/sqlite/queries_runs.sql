-- Workflow runs (schema 4): the run row, task checkpoints, interrupts and events.

-- name: insert_run
INSERT INTO lc_runs (run_id, workflow_id, status, input, user_id, job_id, idempotency_key,
                     max_retries, timeout_secs, available_at, holder, lease_expires_at,
                     created_at, updated_at)
VALUES (:run_id, :workflow_id, :status, :input, :user_id, :job_id, :idempotency_key,
        :max_retries, :timeout_secs, :now, :holder,
        CASE WHEN :holder IS NULL THEN NULL ELSE :now + :lease END, :now, :now)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get_run
SELECT * FROM lc_runs WHERE run_id = :run_id;

-- name: run_by_idempotency_key
SELECT * FROM lc_runs WHERE idempotency_key = :key;

-- name: take_run
-- Hold a run to execute it: a queued or waiting one, or a running one whose holder went quiet.
UPDATE lc_runs SET status = 'running', holder = :holder, lease_expires_at = :now + :lease,
                   attempts = attempts + :bump, updated_at = :now
WHERE run_id = :run_id AND cancel_requested = 0
  AND (status IN ('queued', 'waiting_input')
       OR (status = 'running' AND (lease_expires_at <= :now OR holder = :holder)))
RETURNING *;

-- name: renew_run
UPDATE lc_runs SET lease_expires_at = :now + :lease
WHERE run_id = :run_id AND holder = :holder AND status = 'running'
RETURNING cancel_requested;

-- name: end_run
-- The run's holder records where it stands: completed, failed, cancelled or waiting_input.
UPDATE lc_runs SET status = :status, result = :result, error = :error, state = :state,
                   holder = NULL, lease_expires_at = NULL, updated_at = :now,
                   finished_at = CASE WHEN :status = 'waiting_input' THEN NULL ELSE :now END
WHERE run_id = :run_id AND holder = :holder AND status = 'running'
RETURNING *;

-- name: run_steps
SELECT * FROM lc_run_steps WHERE run_id = :run_id ORDER BY position;

-- name: insert_step
-- A task's checkpoint, only while the run is still ours (a run taken over is not written to).
INSERT OR IGNORE INTO lc_run_steps (run_id, position, name, args_hash, ok, result, changes,
                                    attempts, started_at, finished_at)
SELECT :run_id, :position, :name, :args_hash, :ok, :result, :changes, :attempts,
       :started_at, :now
WHERE EXISTS (SELECT 1 FROM lc_runs
              WHERE run_id = :run_id AND holder = :holder AND status = 'running');

-- name: run_cancel_requested
SELECT cancel_requested FROM lc_runs WHERE run_id = :run_id;

-- name: run_interrupts
SELECT * FROM lc_run_interrupts WHERE run_id = :run_id;

-- name: ask_interrupt
INSERT INTO lc_run_interrupts (run_id, key, prompt, schema, error, asked_at)
VALUES (:run_id, :key, :prompt, :schema, :error, :now)
ON CONFLICT (run_id, key) DO UPDATE SET
    prompt = excluded.prompt, schema = excluded.schema, error = excluded.error,
    asked_at = COALESCE(lc_run_interrupts.asked_at, excluded.asked_at),
    value = CASE WHEN excluded.error IS NULL THEN lc_run_interrupts.value END;

-- name: answer_interrupt
INSERT INTO lc_run_interrupts (run_id, key, value, answered_at)
VALUES (:run_id, :key, :value, :now)
ON CONFLICT (run_id, key) DO UPDATE SET
    value = excluded.value, answered_at = excluded.answered_at, error = NULL
WHERE lc_run_interrupts.answered = 0;

-- name: consume_interrupt
UPDATE lc_run_interrupts SET answered = 1 WHERE run_id = :run_id AND key = :key;

-- name: insert_run_event
INSERT OR IGNORE INTO lc_run_events (run_id, seq, origin, kind, data, created_at)
SELECT :run_id, COALESCE(MAX(seq), 0) + 1, :origin, :kind, :data, :now
FROM lc_run_events WHERE run_id = :run_id;

-- name: run_events
SELECT * FROM lc_run_events WHERE run_id = :run_id AND seq > :after ORDER BY seq;

-- name: request_run_cancel
-- Asked for on any process; a queued or waiting run ends at once, a running one at its holder.
UPDATE lc_runs SET cancel_requested = 1, updated_at = :now,
    status = CASE WHEN status IN ('queued', 'waiting_input') THEN 'cancelled' ELSE status END,
    finished_at = CASE WHEN status IN ('queued', 'waiting_input') THEN :now ELSE finished_at END,
    holder = CASE WHEN status IN ('queued', 'waiting_input') THEN NULL ELSE holder END
WHERE run_id = :run_id AND status IN ('queued', 'running', 'waiting_input')
RETURNING *;
