-- Workflow runs (schema 4): the run row, task checkpoints, interrupts and events.

-- name: insert_run
-- One statement (it commits by itself): the run, and for a queued one the workers told. It
-- returns only what the database decided (the caller knows the rest): nothing when the id or
-- the idempotency key is taken.
WITH created AS (
    INSERT INTO lc_runs (run_id, workflow_id, status, input, user_id, job_id, cron_id,
                         concurrency_key, idempotency_key, max_retries, timeout_secs,
                         available_at, holder, lease_expires_at, executions, created_at,
                         updated_at, version, queue_name, priority, dedupe_id)
    VALUES (%(run_id)s, %(workflow_id)s, %(status)s, %(input)s::jsonb, %(user_id)s,
            %(job_id)s, %(cron_id)s, %(concurrency_key)s, %(idempotency_key)s,
            %(max_retries)s, %(timeout_secs)s, lc_now(%(now)s), %(holder)s,
            CASE WHEN %(holder)s::text IS NULL THEN NULL ELSE lc_now(%(now)s) + %(lease)s END,
            CASE WHEN %(holder)s::text IS NULL THEN 0 ELSE 1 END,
            lc_now(%(now)s), lc_now(%(now)s), %(version)s, %(queue_name)s, %(priority)s,
            %(dedupe_id)s)
    ON CONFLICT DO NOTHING
    RETURNING status, created_at, lease_expires_at),
told AS (SELECT pg_notify(%(channel)s, 'queued') FROM created WHERE status = 'queued')
SELECT created.*, (SELECT count(*) FROM told) AS told FROM created;

-- name: get_run
SELECT * FROM lc_runs WHERE run_id = %(run_id)s;

-- name: run_by_idempotency_key
SELECT * FROM lc_runs WHERE idempotency_key = %(key)s;

-- name: take_run
-- Hold a run to execute it: a queued or waiting one, or a running one whose holder went quiet.
UPDATE lc_runs SET status = 'running', holder = %(holder)s,
                   lease_expires_at = lc_now(%(now)s) + %(lease)s,
                   executions = executions + 1, updated_at = lc_now(%(now)s), wake_at = NULL,
                       recv_topic = NULL
WHERE run_id = %(run_id)s AND NOT cancel_requested
  AND (status IN ('queued', 'waiting_input')
       OR (status = 'running'
           AND (lease_expires_at <= lc_now(%(now)s) OR holder = %(holder)s)))
RETURNING *;

-- name: renew_runs
-- The heartbeat: every execution of one process renewed at once. ``held`` is a JSON array of
-- {"run_id", "holder"}; the runs it returns are still ours, with their cancel flags.
UPDATE lc_runs SET lease_expires_at = lc_now(%(now)s) + %(lease)s
FROM jsonb_to_recordset(%(held)s::jsonb) AS h(run_id text, holder text)
WHERE lc_runs.run_id = h.run_id AND lc_runs.holder = h.holder AND lc_runs.status = 'running'
RETURNING lc_runs.run_id, lc_runs.holder, lc_runs.cancel_requested;

-- name: run_steps
SELECT * FROM lc_run_steps WHERE run_id = %(run_id)s ORDER BY position;

-- name: runs_steps
-- The checkpoints of several runs (a JSON array of their ids) in one read: a claim's runs
-- that resume.
SELECT * FROM lc_run_steps WHERE run_id IN (SELECT jsonb_array_elements_text(%(run_ids)s::jsonb)) ORDER BY run_id, position;

-- name: runs_interrupts
SELECT * FROM lc_run_interrupts WHERE run_id IN (SELECT jsonb_array_elements_text(%(run_ids)s::jsonb));

-- name: insert_step
-- A task's checkpoint, only while the run is still ours (a run taken over is not written to);
-- it returns a row, with the run's cancel flag, only when it wrote one. FOR SHARE waits for a
-- takeover in flight, so a checkpoint never lands after another worker took the run.
WITH held AS (
    SELECT cancel_requested FROM lc_runs
    WHERE run_id = %(run_id)s AND holder = %(holder)s AND status = 'running'
    FOR SHARE)
INSERT INTO lc_run_steps (run_id, position, name, args_hash, ok, result, changes, attempts,
                          started_at, finished_at)
SELECT %(run_id)s, %(position)s, %(name)s, %(args_hash)s, %(ok)s, %(result)s::jsonb,
       %(changes)s::jsonb, %(attempts)s, %(started_at)s, lc_now(%(now)s)
FROM held
ON CONFLICT DO NOTHING
RETURNING (SELECT cancel_requested FROM held) AS cancel_requested;

-- name: run_interrupts
SELECT * FROM lc_run_interrupts WHERE run_id = %(run_id)s;

-- name: ask_interrupt
INSERT INTO lc_run_interrupts (run_id, key, prompt, schema, error, asked_at)
VALUES (%(run_id)s, %(key)s, %(prompt)s, %(schema)s::jsonb, %(error)s, lc_now(%(now)s))
ON CONFLICT (run_id, key) DO UPDATE SET
    prompt = excluded.prompt, schema = excluded.schema, error = excluded.error,
    asked_at = COALESCE(lc_run_interrupts.asked_at, excluded.asked_at),
    value = CASE WHEN excluded.error IS NULL THEN lc_run_interrupts.value END;

-- name: answer_interrupt
INSERT INTO lc_run_interrupts (run_id, key, value, answered_at)
VALUES (%(run_id)s, %(key)s, %(value)s::jsonb, lc_now(%(now)s))
ON CONFLICT (run_id, key) DO UPDATE SET
    value = excluded.value, answered_at = excluded.answered_at, error = NULL
WHERE NOT lc_run_interrupts.answered;

-- name: consume_interrupt
UPDATE lc_run_interrupts SET answered = TRUE WHERE run_id = %(run_id)s AND key = %(key)s;

-- name: insert_run_event
INSERT INTO lc_run_events (run_id, seq, origin, kind, data, created_at)
SELECT %(run_id)s, COALESCE(MAX(seq), 0) + 1, %(origin)s, %(kind)s, %(data)s::jsonb,
       lc_now(%(now)s)
FROM lc_run_events WHERE run_id = %(run_id)s
ON CONFLICT DO NOTHING;

-- name: run_events
SELECT * FROM lc_run_events WHERE run_id = %(run_id)s AND seq > %(after)s ORDER BY seq;

-- name: request_run_cancel
-- Asked for on any process; a queued or waiting run ends at once, a running one at its holder.
UPDATE lc_runs SET cancel_requested = TRUE, updated_at = lc_now(%(now)s),
    status = CASE WHEN status IN ('queued', 'waiting_input') THEN 'cancelled' ELSE status END,
    error = CASE WHEN status IN ('queued', 'waiting_input') THEN %(error)s::jsonb ELSE error END,
    finished_at = CASE WHEN status IN ('queued', 'waiting_input') THEN lc_now(%(now)s)
                       ELSE finished_at END,
    holder = CASE WHEN status IN ('queued', 'waiting_input') THEN NULL ELSE holder END
WHERE run_id = %(run_id)s AND status IN ('queued', 'running', 'waiting_input')
RETURNING *;

-- name: claim_runs
-- Up to ``limit`` runs to execute, in one statement: abandoned ones first (their holder
-- stopped renewing its lease; they resume from their checkpoints), then queued ones, oldest
-- first. Runs sharing a concurrency key start one at a time, in order: a run waits while
-- another of its key is running or waiting, or an older one is queued.
-- With ``end_run_id``, the same statement first ends that run: the run's holder records
-- where it stands (completed, failed, cancelled, waiting_input, or queued with ``wake_at``:
-- asleep) and, with ``step_position``,
-- the checkpoint of its last task call (see insert_step), written only if the end is. It then
-- claims only if that end was the holder's to record (a worker's slot refilled as its run
-- ends: one round trip, not two); ``limit`` 0 only ends. Rows come back with ``kind``:
-- 'ended' or 'claimed'.
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
-- With ``registered`` (a JSON array of [workflow_id, version] pairs: what the worker has
-- registered) it claims only runs of those; others stay where they are for another worker.
-- With ``ahead`` > 0 it also claims queued runs due within that many seconds (asleep, most
-- often), with ``updated_at`` their due time: the worker starts each then, not before.
WITH ended AS (
    UPDATE lc_runs SET status = %(status)s, result = %(result)s::jsonb,
                       error = %(error)s::jsonb, state = %(state)s::jsonb, holder = NULL,
                       lease_expires_at = NULL,
                       errors = CASE WHEN %(error)s::jsonb IS NULL THEN errors
                                     ELSE errors || jsonb_build_array(%(error)s::jsonb) END,
                       updated_at = lc_now(%(now)s),
                       finished_at = CASE WHEN %(status)s IN ('waiting_input', 'queued')
                                          THEN NULL ELSE lc_now(%(now)s) END,
                       wake_at = %(wake_at)s::float8, recv_topic = %(recv_topic)s::text,
                       -- a recv without a timeout waits for a send to wake it, however long
                       available_at = CASE
                           WHEN %(recv_topic)s::text IS NOT NULL AND %(wake_at)s::float8 IS NULL
                           THEN 1e300 ELSE COALESCE(%(wake_at)s::float8, available_at) END
    WHERE run_id = %(end_run_id)s AND holder = %(end_holder)s AND status = 'running'
    RETURNING *),
checkpoint AS (
    INSERT INTO lc_run_steps (run_id, position, name, args_hash, ok, result, changes,
                              attempts, started_at, finished_at)
    SELECT run_id, %(step_position)s, %(step_name)s, %(step_args_hash)s, TRUE,
           %(step_result)s::jsonb, %(step_changes)s::jsonb, %(step_attempts)s,
           %(step_started_at)s, lc_now(%(step_finished_at)s)
    FROM ended WHERE %(step_position)s::integer IS NOT NULL
    ON CONFLICT DO NOTHING),
go AS (SELECT %(end_run_id)s::text IS NULL OR EXISTS (SELECT 1 FROM ended) AS ok),
abandoned AS (
    SELECT run_id, lease_expires_at AS since FROM lc_runs
    WHERE status = 'running' AND lease_expires_at <= lc_now(%(now)s)
      AND run_id IS DISTINCT FROM %(end_run_id)s AND (SELECT ok FROM go)
      /*if registered*/ AND (workflow_id, version) IN (SELECT w ->> 0, w ->> 1 FROM jsonb_array_elements(%(registered)s::jsonb) w)
    ORDER BY lease_expires_at LIMIT {limit}
    FOR UPDATE SKIP LOCKED),
queued AS (
    SELECT r.run_id, r.available_at AS since FROM lc_runs r
    WHERE r.status = 'queued' AND r.available_at <= lc_now(%(now)s) + %(ahead)s::float8
      AND (SELECT ok FROM go)
      AND r.queue_name IS NULL  -- a named queue's runs are claimed by claim_queue_runs
      /*if registered*/ AND (r.workflow_id, r.version) IN (SELECT w ->> 0, w ->> 1 FROM jsonb_array_elements(%(registered)s::jsonb) w)
      AND (r.concurrency_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM lc_runs o
          WHERE o.concurrency_key = r.concurrency_key AND o.run_id <> r.run_id
            AND (o.status IN ('running', 'waiting_input')
                 OR (o.status = 'queued' AND (o.created_at, o.run_id) < (r.created_at, r.run_id)))))
    ORDER BY r.available_at, r.run_id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED),
picked AS (
    SELECT run_id FROM (SELECT run_id, 0 AS rank, since FROM abandoned
                        UNION ALL SELECT run_id, 1, since FROM queued) candidates
    ORDER BY rank, since, run_id LIMIT {limit}),
claimed AS (
    UPDATE lc_runs SET status = 'running', holder = %(holder)s,
                       lease_expires_at = lc_now(%(now)s) + %(lease)s,
                       executions = executions + 1, wake_at = NULL, recv_topic = NULL,
                       -- a queued run claimed ahead starts when it is due: the engine takes
                       -- updated_at as the time it started
                       updated_at = CASE WHEN lc_runs.status = 'queued'
                                         THEN GREATEST(lc_now(%(now)s), lc_runs.available_at)
                                         ELSE lc_now(%(now)s) END
    FROM picked WHERE lc_runs.run_id = picked.run_id
    RETURNING lc_runs.*)
SELECT 'ended' AS kind, * FROM ended
UNION ALL
SELECT 'claimed' AS kind, * FROM claimed;

-- name: retry_run
-- A failed attempt with retries left: back to the queue after a backoff, checkpoints kept.
UPDATE lc_runs SET status = 'queued', holder = NULL, lease_expires_at = NULL,
                   attempts = attempts + 1, available_at = lc_now(%(now)s) + %(delay)s,
                   error = %(error)s::jsonb,
                   errors = errors || jsonb_build_array(%(error)s::jsonb),
                   updated_at = lc_now(%(now)s)
WHERE run_id = %(run_id)s AND holder = %(holder)s AND status = 'running'
RETURNING *;

-- name: drop_failed_steps
-- A retry runs the tasks that failed again, instead of replaying their failure.
DELETE FROM lc_run_steps WHERE run_id = %(run_id)s AND NOT ok;

-- name: queue_run
-- A waiting run with its answers stored goes back to the queue for a worker to execute.
UPDATE lc_runs SET status = 'queued', available_at = lc_now(%(now)s), updated_at = lc_now(%(now)s)
WHERE run_id = %(run_id)s AND status = 'waiting_input'
RETURNING *;

-- name: lock_run
-- The run, locked until the transaction ends: two answers racing for one waiting run
-- take turns, and the second sees the first's outcome.
SELECT * FROM lc_runs WHERE run_id = %(run_id)s FOR UPDATE;

-- name: cancelling_runs
SELECT run_id FROM lc_runs
WHERE holder LIKE %(pattern)s ESCAPE '\' AND status = 'running' AND cancel_requested
  AND lease_expires_at IS NOT NULL;  -- the leased runs' index


-- name: database_now
-- The database's clock (a sleep's wake-up time is on it), or the fake one passed in tests.
SELECT lc_now(%(now)s) AS now;
