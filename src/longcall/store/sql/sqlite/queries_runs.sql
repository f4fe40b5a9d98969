-- Workflow runs (schema 4): the run row, task checkpoints, interrupts and events.

-- name: insert_run
-- (SQLite has no notifications: workers in other processes find a queued run by polling.)
-- It returns only what the database decided: nothing when the id or idempotency key is taken.
INSERT INTO lc_runs (run_id, workflow_id, status, input, user_id, job_id, cron_id,
                     concurrency_key, idempotency_key, max_retries, timeout_secs, available_at,
                     holder, lease_expires_at, executions, created_at, updated_at, version,
                     queue_name, priority, dedupe_id)
VALUES (:run_id, :workflow_id, :status, :input, :user_id, :job_id, :cron_id, :concurrency_key,
        :idempotency_key, :max_retries, :timeout_secs, :now, :holder,
        CASE WHEN :holder IS NULL THEN NULL ELSE :now + :lease END,
        CASE WHEN :holder IS NULL THEN 0 ELSE 1 END, :now, :now, :version, :queue_name,
        :priority, :dedupe_id)
ON CONFLICT DO NOTHING
RETURNING status, created_at, lease_expires_at;

-- name: get_run
SELECT * FROM lc_runs WHERE run_id = :run_id;

-- name: run_by_idempotency_key
SELECT * FROM lc_runs WHERE idempotency_key = :key;

-- name: take_run
-- Hold a run to execute it: a queued or waiting one, or a running one whose holder went quiet.
UPDATE lc_runs SET status = 'running', holder = :holder, lease_expires_at = :now + :lease,
                   executions = executions + 1, updated_at = :now, wake_at = NULL, recv_topic = NULL
WHERE run_id = :run_id AND cancel_requested = 0
  AND (status IN ('queued', 'waiting_input')
       OR (status = 'running' AND (lease_expires_at <= :now OR holder = :holder)))
RETURNING *;

-- name: renew_runs
-- The heartbeat: every execution of one process renewed at once. ``held`` is a JSON array of
-- {"run_id", "holder"}; the runs it returns are still ours, with their cancel flags.
UPDATE lc_runs SET lease_expires_at = :now + :lease
WHERE status = 'running'
  AND (run_id, holder) IN (SELECT json_extract(value, '$.run_id'), json_extract(value, '$.holder')
                           FROM json_each(:held))
RETURNING run_id, holder, cancel_requested;

-- name: run_steps
SELECT * FROM lc_run_steps WHERE run_id = :run_id ORDER BY position;

-- name: runs_steps
-- The checkpoints of several runs (a JSON array of their ids) in one read: a claim's runs
-- that resume.
SELECT * FROM lc_run_steps WHERE run_id IN (SELECT value FROM json_each(:run_ids)) ORDER BY run_id, position;

-- name: runs_interrupts
SELECT * FROM lc_run_interrupts WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: insert_step
-- A task's checkpoint, only while the run is still ours (a run taken over is not written to);
-- it returns a row, with the run's cancel flag, only when it wrote one.
INSERT OR IGNORE INTO lc_run_steps (run_id, position, name, args_hash, ok, result, changes,
                                    attempts, started_at, finished_at)
SELECT :run_id, :position, :name, :args_hash, :ok, :result, :changes, :attempts,
       :started_at, :now
WHERE EXISTS (SELECT 1 FROM lc_runs
              WHERE run_id = :run_id AND holder = :holder AND status = 'running')
RETURNING (SELECT cancel_requested FROM lc_runs WHERE run_id = :run_id) AS cancel_requested;

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
    error = CASE WHEN status IN ('queued', 'waiting_input') THEN :error ELSE error END,
    finished_at = CASE WHEN status IN ('queued', 'waiting_input') THEN :now ELSE finished_at END,
    holder = CASE WHEN status IN ('queued', 'waiting_input') THEN NULL ELSE holder END
WHERE run_id = :run_id AND status IN ('queued', 'running', 'waiting_input')
RETURNING *;

-- name: claim_runs
-- Up to ``limit`` runs to execute: abandoned ones first (their holder stopped renewing its
-- lease; they resume from their checkpoints), then queued ones, oldest first. Runs sharing a
-- concurrency key start one at a time, in order: a run waits while another of its key is
-- running or waiting, or an older one is queued.
-- With ``end_run_id``, the first statement ends that run (its holder records where it
-- stands: completed, failed, cancelled, waiting_input, or queued with ``wake_at``: asleep), and the second claims only if that
-- end was the holder's to record (changes() counts the first's rows); ``limit`` 0 only ends.
-- Both run in one transaction; rows come back with ``kind``: 'ended' or 'claimed'.
-- With ``registered`` (a JSON array of [workflow_id, version] pairs: what the worker has
-- registered) it claims only runs of those; others stay where they are for another worker.
-- With ``ahead`` > 0 it also claims queued runs due within that many seconds (asleep, most
-- often), with ``updated_at`` their due time: the worker starts each then, not before.
UPDATE lc_runs SET status = :status, result = :result, error = :error, state = :state,
                   errors = CASE WHEN :error IS NULL THEN errors
                                 ELSE json_insert(errors, '$[#]', json(:error)) END,
                   holder = NULL, lease_expires_at = NULL, updated_at = :now,
                   finished_at = CASE WHEN :status IN ('waiting_input', 'queued') THEN NULL
                                      ELSE :now END,
                   wake_at = :wake_at, recv_topic = :recv_topic,
                   -- a recv without a timeout waits for a send to wake it, however long
                   available_at = CASE WHEN :recv_topic IS NOT NULL AND :wake_at IS NULL
                                       THEN 1e300 ELSE COALESCE(:wake_at, available_at) END
WHERE run_id = :end_run_id AND holder = :end_holder AND status = 'running'
RETURNING 'ended' AS kind, *;

UPDATE lc_runs SET status = 'running', holder = :holder, lease_expires_at = :now + :lease,
                   executions = executions + 1, wake_at = NULL, recv_topic = NULL,
                   -- a queued run claimed ahead starts when it is due: the engine takes
                   -- updated_at as the time it started
                   updated_at = CASE WHEN status = 'queued' THEN MAX(:now, available_at)
                                     ELSE :now END
WHERE (:end_run_id IS NULL OR changes() = 1) AND run_id IN (
    SELECT run_id FROM (
        SELECT * FROM (
            SELECT run_id, 0 AS rank, lease_expires_at AS since FROM lc_runs
            WHERE status = 'running' AND lease_expires_at <= :now
              /*if registered*/ AND EXISTS (SELECT 1 FROM json_each(:registered) w WHERE json_extract(w.value, '$[0]') = workflow_id AND json_extract(w.value, '$[1]') = version)
            ORDER BY lease_expires_at LIMIT :limit)
        UNION ALL
        SELECT * FROM (
            SELECT r.run_id, 1 AS rank, r.available_at AS since FROM lc_runs r
            WHERE r.status = 'queued' AND r.available_at <= :now + :ahead
              AND r.queue_name IS NULL  -- a named queue's runs: claim_queue_runs
              /*if registered*/ AND EXISTS (SELECT 1 FROM json_each(:registered) w WHERE json_extract(w.value, '$[0]') = r.workflow_id AND json_extract(w.value, '$[1]') = r.version)
              AND (r.concurrency_key IS NULL OR NOT EXISTS (
                  SELECT 1 FROM lc_runs o
                  WHERE o.concurrency_key = r.concurrency_key AND o.run_id <> r.run_id
                    AND (o.status IN ('running', 'waiting_input')
                         OR (o.status = 'queued'
                             AND (o.created_at, o.run_id) < (r.created_at, r.run_id)))))
            ORDER BY r.available_at, r.run_id
            LIMIT :limit))
    ORDER BY rank, since, run_id LIMIT :limit)
RETURNING 'claimed' AS kind, *;

-- name: retry_run
-- A failed attempt with retries left: back to the queue after a backoff, checkpoints kept.
UPDATE lc_runs SET status = 'queued', holder = NULL, lease_expires_at = NULL,
                   attempts = attempts + 1, available_at = :now + :delay, error = :error,
                   errors = json_insert(errors, '$[#]', json(:error)), updated_at = :now
WHERE run_id = :run_id AND holder = :holder AND status = 'running'
RETURNING *;

-- name: drop_failed_steps
-- A retry runs the tasks that failed again, instead of replaying their failure.
DELETE FROM lc_run_steps WHERE run_id = :run_id AND ok = 0;

-- name: queue_run
-- A waiting run with its answers stored goes back to the queue for a worker to execute.
UPDATE lc_runs SET status = 'queued', available_at = :now, updated_at = :now
WHERE run_id = :run_id AND status = 'waiting_input'
RETURNING *;

-- name: lock_run
-- The run, to change in this transaction (BEGIN IMMEDIATE already holds the write lock,
-- so racing answers take turns).
SELECT * FROM lc_runs WHERE run_id = :run_id;

-- name: cancelling_runs
SELECT run_id FROM lc_runs
WHERE holder LIKE :pattern ESCAPE '\' AND status = 'running' AND cancel_requested = 1
  AND lease_expires_at IS NOT NULL;  -- the leased runs' index


-- name: database_now
-- The database's clock (a sleep's wake-up time is on it); SQLite's is the time we pass.
SELECT :now AS now;
