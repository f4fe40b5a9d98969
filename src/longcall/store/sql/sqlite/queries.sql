-- Named queries for SQLite. Every name here exists in postgres/queries.sql too.
-- Parameters are :named; :now is always given (one host, one clock).

-- name: insert_job
INSERT INTO lc_jobs (job_id, tool_name, args, app_name, user_id, session_id, call_id,
                     invocation_id, deadline_at, created_at, updated_at, attached_at, cancel_hook,
                     trace_context)
VALUES (:job_id, :tool_name, :args, :app_name, :user_id, :session_id, :call_id,
        :invocation_id, :now + :deadline, :now, :now,
        CASE WHEN :session_id IS NOT NULL AND :call_id IS NOT NULL THEN :now END, :cancel_hook,
        :trace_context)
ON CONFLICT (job_id) DO NOTHING
RETURNING *;

-- name: get_job
SELECT * FROM lc_jobs WHERE job_id = :job_id;

-- name: get_job_for_update
SELECT * FROM lc_jobs WHERE job_id = :job_id;

-- name: abandon_job
DELETE FROM lc_jobs WHERE job_id = :job_id AND state = 'started'
  AND EXISTS (SELECT 1 FROM lc_outbox o WHERE o.job_id = lc_jobs.job_id AND o.kind = 'dispatch');

-- name: get_job_of_call
-- The job already joined to this function call (the lc_jobs_call index: session, call, user).
SELECT * FROM lc_jobs
WHERE session_id = :session_id AND call_id = :call_id AND COALESCE(user_id, '') = COALESCE(:user_id, '');

-- name: set_pending
-- What the tool answered when it submitted the work; the first answer recorded stays.
UPDATE lc_jobs SET
    pending_message = COALESCE(pending_message, :message),
    pending_fields = COALESCE(pending_fields, :fields),
    updated_at = :now
WHERE job_id = :job_id AND (pending_message IS NULL OR pending_fields IS NULL);

-- name: attach_job
UPDATE lc_jobs SET
    app_name = COALESCE(app_name, :app_name),
    user_id = COALESCE(user_id, :user_id),
    session_id = COALESCE(session_id, :session_id),
    call_id = COALESCE(call_id, :call_id),
    invocation_id = COALESCE(invocation_id, :invocation_id),
    delivery = CASE
        WHEN delivery = 'none' AND COALESCE(session_id, :session_id) IS NOT NULL
             AND COALESCE(call_id, :call_id) IS NOT NULL
             AND (state <> 'started' OR notify_seq > notified_seq) THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery = 'none' AND COALESCE(session_id, :session_id) IS NOT NULL
             AND COALESCE(call_id, :call_id) IS NOT NULL
             AND (state <> 'started' OR notify_seq > notified_seq) THEN :now
        ELSE available_at END,
    attached_at = CASE
        WHEN attached_at IS NULL AND COALESCE(session_id, :session_id) IS NOT NULL
             AND COALESCE(call_id, :call_id) IS NOT NULL THEN :now
        ELSE attached_at END,
    updated_at = :now
WHERE job_id = :job_id
RETURNING *;

-- name: finish_job
-- The conditional terminal update: only a started job changes, so the first result wins,
-- and only before its deadline: from deadline_at on (the sweeper's overdue_jobs rule,
-- on the same clock) only the deadline answers, by expire_job.
UPDATE lc_jobs SET
    state = :state,
    result = :result,
    finished_at = :now,
    updated_at = :now,
    event_seq = event_seq + 1,
    -- 'failed' here can only be a given-up progress announcement: the final result still goes.
    delivery = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN :now
        WHEN delivery = 'ready' AND claim_holder IS NULL THEN MIN(available_at, :now)
        ELSE available_at END,
    attempts = CASE WHEN delivery = 'failed' THEN 0 ELSE attempts END
WHERE job_id = :job_id AND state = 'started'
  AND (:state = 'expired' OR deadline_at IS NULL OR deadline_at > :now)
RETURNING *;

-- name: expire_job
-- The deadline's answer: a started job whose deadline has passed becomes expired (the
-- sweeper, or a result that came too late). Not once the deadline was moved past now.
UPDATE lc_jobs SET
    state = 'expired',
    result = :result,
    finished_at = :now,
    updated_at = :now,
    event_seq = event_seq + 1,
    -- 'failed' here can only be a given-up progress announcement: the final result still goes.
    delivery = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN :now
        WHEN delivery = 'ready' AND claim_holder IS NULL THEN MIN(available_at, :now)
        ELSE available_at END,
    attempts = CASE WHEN delivery = 'failed' THEN 0 ELSE attempts END
WHERE job_id = :job_id AND state = 'started' AND deadline_at <= :now
RETURNING *;

-- name: record_progress
UPDATE lc_jobs SET
    progress = :data,
    event_seq = event_seq + 1,
    progress_seq = event_seq + 1,
    notify_seq = CASE WHEN :notify THEN event_seq + 1 ELSE notify_seq END,
    delivery = CASE
        WHEN :notify AND delivery = 'none' AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready' ELSE delivery END,
    available_at = CASE
        WHEN :notify AND delivery = 'none' AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN MAX(:now, COALESCE(notified_at + :throttle, :now)) ELSE available_at END,
    updated_at = :now
WHERE job_id = :job_id AND state = 'started'
RETURNING *;

-- name: bump_event_seq
UPDATE lc_jobs SET event_seq = event_seq + 1 WHERE job_id = :job_id RETURNING event_seq;

-- name: insert_event
INSERT INTO lc_job_events (job_id, seq, kind, data, created_at)
VALUES (:job_id, :seq, :kind, :data, :now);

-- name: job_events
SELECT * FROM lc_job_events WHERE job_id = :job_id AND seq > :after ORDER BY seq;

-- name: claim_candidates
-- Ready jobs of every app whose session nobody is running right now, oldest first.
SELECT j.* FROM lc_jobs j
WHERE j.delivery = 'ready' AND j.available_at <= :now
  AND NOT EXISTS (SELECT 1 FROM lc_session_leases l
                  WHERE l.app_name = COALESCE(j.app_name, '') AND l.user_id = COALESCE(j.user_id, '')
                    AND l.session_id = j.session_id AND l.expires_at > :now)
ORDER BY j.available_at, j.job_id
LIMIT :limit;

-- name: claim_candidates_for_app
-- One app's ready jobs, and those of no app (which the claim gives to it), whose
-- session nobody is running right now, oldest first.
SELECT j.* FROM lc_jobs j
WHERE j.delivery = 'ready' AND j.available_at <= :now
  AND (j.app_name = :app_name OR j.app_name IS NULL)
  AND NOT EXISTS (SELECT 1 FROM lc_session_leases l
                  WHERE l.app_name = COALESCE(j.app_name, :app_name) AND l.user_id = COALESCE(j.user_id, '')
                    AND l.session_id = j.session_id AND l.expires_at > :now)
ORDER BY j.available_at, j.job_id
LIMIT :limit;

-- name: session_ready_jobs
-- The rest of a session's ready jobs, once its lease is held; with ``unscoped``, those of no
-- app too. (Ready jobs always have a call id; saying so lets the (session_id, call_id) index
-- serve the lookup.)
SELECT * FROM lc_jobs
WHERE call_id IS NOT NULL AND session_id = :session_id
  AND COALESCE(user_id, '') = :user_id
  AND (app_name = :app_name OR (app_name IS NULL AND :unscoped))
  AND delivery = 'ready' AND available_at <= :now
ORDER BY available_at, job_id;

-- name: claim_job
-- A job of no app becomes the claiming app's: its lease is that app's session's.
UPDATE lc_jobs SET claim_holder = :holder, claim_fence = :fence,
                   app_name = COALESCE(app_name, :app_name),
                   available_at = :now + :lease, attempts = attempts + 1, updated_at = :now
WHERE job_id = :job_id AND delivery = 'ready'
RETURNING *;

-- name: renew_job_claim
UPDATE lc_jobs SET available_at = :now + :lease
WHERE job_id = :job_id AND claim_holder = :holder AND claim_fence IS :fence
  AND delivery = 'ready';

-- name: mark_final_delivered
-- This and the other outcomes of a claim count only while its holder still holds the
-- job's session under the claim's fence: one that lost it (to another worker or a user
-- turn) records nothing, and the job goes back once its claim runs out.
UPDATE lc_jobs SET delivery = 'delivered', delivered_at = :now, claim_holder = NULL,
                   available_at = NULL, attempts = 0, last_error = NULL, updated_at = :now
WHERE job_id = :job_id AND claim_holder = :holder AND claim_fence IS :fence
  AND delivery = 'ready' AND state <> 'started'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = :holder AND l.fence = :fence);

-- name: mark_progress_delivered
UPDATE lc_jobs SET
    notified_seq = :seq,
    notified_at = :now,
    claim_holder = NULL,
    attempts = 0,
    delivery = CASE WHEN state <> 'started' OR notify_seq > :seq THEN 'ready' ELSE 'none' END,
    available_at = CASE WHEN state <> 'started' THEN :now
                        WHEN notify_seq > :seq THEN :now + :throttle
                        ELSE NULL END,
    updated_at = :now
WHERE job_id = :job_id AND claim_holder = :holder AND claim_fence IS :fence
  AND delivery = 'ready'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = :holder AND l.fence = :fence);

-- name: release_job
-- A delivery that did not happen: retry later, or give up visibly (failed / orphaned).
UPDATE lc_jobs SET claim_holder = NULL, last_error = :error, delivery = :delivery,
                   available_at = :now + :delay, updated_at = :now
WHERE job_id = :job_id AND claim_holder = :holder AND claim_fence IS :fence
  AND delivery = 'ready'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = :holder AND l.fence = :fence);

-- name: redeliver_job
-- An orphaned or given-up delivery, once its cause is fixed: ready again with fresh attempts,
-- optionally for another app.
UPDATE lc_jobs SET delivery = 'ready', available_at = :now, attempts = 0, claim_holder = NULL,
                   last_error = NULL, app_name = COALESCE(:app_name, app_name),
                   updated_at = :now
WHERE job_id = :job_id AND delivery IN ('orphaned', 'failed')
RETURNING *;

-- name: overdue_jobs
SELECT * FROM lc_jobs WHERE state = 'started' AND deadline_at <= :now
ORDER BY deadline_at LIMIT :limit;

-- name: list_jobs
-- Each filter line is sent only when its value is given (queries.OPTIONAL_MARK): SQLite
-- plans `(:x IS NULL OR col = :x)` as a scan of the whole table, whatever :x is.
SELECT * FROM lc_jobs
WHERE TRUE
  /*if state*/ AND state = :state
  /*if tool_name*/ AND tool_name = :tool_name
  /*if session_id*/ AND session_id = :session_id
  /*if user_id*/ AND user_id = :user_id
  /*if delivery*/ AND delivery = :delivery
  -- The search box: a pattern with the user's % _ and \ escaped. SQLite's LIKE ignores the
  -- case of ASCII letters.
  /*if pattern*/ AND (job_id LIKE :pattern ESCAPE '\' OR tool_name LIKE :pattern ESCAPE '\'
  /*if pattern*/      OR session_id LIKE :pattern ESCAPE '\' OR user_id LIKE :pattern ESCAPE '\'
  /*if pattern*/      OR call_id LIKE :pattern ESCAPE '\' OR args LIKE :pattern ESCAPE '\')
  /*if before_created*/ AND (created_at < :before_created
  /*if before_created*/      OR (created_at = :before_created AND job_id < :before_id))
ORDER BY created_at DESC, job_id DESC
LIMIT :limit;

-- name: search_jobs
-- A search that reads at most :window jobs (the newest that pass the filters, from the
-- cursor on), whatever the size of the table: the matches among them, newest first, and the
-- last job read (nth = :window) when the window was full, where the next search goes on.
SELECT * FROM (
    SELECT jobs.*, ROW_NUMBER() OVER (ORDER BY created_at DESC, job_id DESC) AS nth,
           (job_id LIKE :pattern ESCAPE '\' OR tool_name LIKE :pattern ESCAPE '\'
            OR session_id LIKE :pattern ESCAPE '\' OR user_id LIKE :pattern ESCAPE '\'
            OR call_id LIKE :pattern ESCAPE '\' OR args LIKE :pattern ESCAPE '\') AS hit
    FROM (
        SELECT * FROM lc_jobs
        WHERE TRUE
          /*if state*/ AND state = :state
          /*if tool_name*/ AND tool_name = :tool_name
          /*if session_id*/ AND session_id = :session_id
          /*if user_id*/ AND user_id = :user_id
          /*if delivery*/ AND delivery = :delivery
          /*if before_created*/ AND (created_at < :before_created
          /*if before_created*/      OR (created_at = :before_created AND job_id < :before_id))
        ORDER BY created_at DESC, job_id DESC
        LIMIT :window
    ) AS jobs
) AS scanned
WHERE hit OR nth = :window
ORDER BY created_at DESC, job_id DESC
LIMIT :limit + 1;

-- name: count_jobs
-- Kept by the triggers of schema 14.
SELECT state, delivery, n FROM lc_job_counts WHERE n <> 0;

-- name: fold_job_counts
-- SQLite's triggers add to lc_job_counts directly; only the emptied rows are left to go.
DELETE FROM lc_job_counts WHERE n = 0;

-- name: take_session_lease
-- Every take raises the session's fence, a renewal by the same holder too: a delivery still
-- running under the lease's earlier take is fenced off from the new one.
INSERT INTO lc_session_leases (app_name, user_id, session_id, holder, kind, expires_at, fence)
VALUES (:app_name, :user_id, :session_id, :holder, :kind, :now + :ttl, 1)
ON CONFLICT (app_name, user_id, session_id) DO UPDATE SET
    holder = excluded.holder, kind = excluded.kind, expires_at = excluded.expires_at,
    fence = lc_session_leases.fence + 1
WHERE lc_session_leases.expires_at <= :now OR lc_session_leases.holder = excluded.holder
RETURNING holder, fence;

-- name: renew_session_lease
-- A user turn's lease: its holder is its own, so the holder alone must match.
UPDATE lc_session_leases SET expires_at = :now + :ttl
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND holder = :holder;

-- name: renew_fenced_session_lease
-- A delivery's lease: only under the fence it was claimed with.
UPDATE lc_session_leases SET expires_at = :now + :ttl
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND holder = :holder AND fence = :fence;

-- name: release_session_lease
-- The row stays (emptied and expired) so that the session's fence keeps rising.
UPDATE lc_session_leases SET holder = '', expires_at = 0
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND holder = :holder;

-- name: release_fenced_session_lease
-- A delivery's release: only the take its claim was made under, so a delivery ending late
-- never frees the lease a newer claim of the same holder took.
UPDATE lc_session_leases SET holder = '', expires_at = 0
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND holder = :holder AND fence = :fence;

-- name: session_fence_held
-- Whether a fenced holder still holds the session: nobody took it since, and it has not run out.
SELECT 1 AS held FROM lc_session_leases
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
  AND holder = :holder AND fence = :fence
  AND expires_at > :now;

-- name: session_delivery_calls
-- Which of ``call_ids`` (a JSON array) a live delivery holds on a session: its jobs claimed
-- under the lease's holder and fence. A user turn's lease, or one that ran out, holds none.
-- The jobs are found by session and call, the lookup the (session_id, call_id) index serves:
-- no test of delivery = 'ready', which a claim implies (every way out of it clears the
-- claim) and which would offer the planner the ready jobs' index instead.
SELECT j.call_id FROM lc_session_leases l
JOIN lc_jobs j ON j.claim_holder = l.holder AND j.claim_fence = l.fence
WHERE l.app_name = :app_name AND l.user_id = :user_id AND l.session_id = :session_id
  AND l.kind = 'resume' AND l.holder <> '' AND l.expires_at > :now
  AND j.session_id = :session_id AND j.call_id IN (SELECT value FROM json_each(:call_ids))
  AND COALESCE(j.user_id, '') = :user_id AND COALESCE(j.app_name, '') = :app_name;

-- name: insert_outbox
INSERT INTO lc_outbox (job_id, kind, available_at, holder, created_at)
VALUES (:job_id, :kind, :now + :delay, :holder, :now)
ON CONFLICT (job_id, kind) DO NOTHING;

-- name: delete_outbox
DELETE FROM lc_outbox WHERE job_id = :job_id AND kind = :kind;

-- name: outbox_candidates
SELECT o.*, j.tool_name, j.args FROM lc_outbox o JOIN lc_jobs j ON j.job_id = o.job_id
WHERE o.available_at <= :now
ORDER BY o.available_at
LIMIT :limit;

-- name: claim_outbox
UPDATE lc_outbox SET holder = :holder, available_at = :now + :lease, attempts = attempts + 1
WHERE job_id = :job_id AND kind = :kind
RETURNING attempts;

-- name: retry_outbox
UPDATE lc_outbox SET holder = NULL, available_at = :now + :delay, last_error = :error
WHERE job_id = :job_id AND kind = :kind AND holder = :holder;

-- name: notify
-- SQLite has no notifications: other processes find work by polling.
SELECT :channel, :payload WHERE 0;

-- name: insert_inbox
-- First sight of a delivery; a repeat (same source and id) inserts nothing.
INSERT INTO lc_inbox (source, delivery_id, job_id, kind, outcome, received_at)
VALUES (:source, :delivery_id, :job_id, :kind, 'received', :now)
ON CONFLICT (source, delivery_id) DO NOTHING
RETURNING delivery_id;

-- name: set_inbox_outcome
UPDATE lc_inbox SET outcome = :outcome WHERE source = :source AND delivery_id = :delivery_id;

-- name: job_inbox
SELECT * FROM lc_inbox WHERE job_id = :job_id ORDER BY received_at, delivery_id;

-- name: insert_early_result
INSERT INTO lc_early_results (job_id, state, result, source, delivery_id, received_at)
VALUES (:job_id, :state, :result, :source, :delivery_id, :now)
ON CONFLICT (job_id) DO NOTHING;

-- name: take_early_result
DELETE FROM lc_early_results WHERE job_id = :job_id RETURNING *;

-- name: insert_hook_secret
INSERT INTO lc_webhook_secrets (source, secret_id, secret, created_at)
VALUES (:source, :secret_id, :secret, :now);

-- name: hook_secrets
SELECT * FROM lc_webhook_secrets WHERE source = :source ORDER BY created_at, secret_id;

-- name: all_hook_secrets
SELECT * FROM lc_webhook_secrets ORDER BY source, created_at, secret_id;

-- name: delete_hook_secret
DELETE FROM lc_webhook_secrets WHERE source = :source AND secret_id = :secret_id;

-- name: insert_token
INSERT INTO lc_tokens (token_id, token_hash, user_id, admin, created_at)
VALUES (:token_id, :token_hash, :user_id, :admin, :now);

-- name: token_by_hash
SELECT * FROM lc_tokens WHERE token_hash = :token_hash AND revoked_at IS NULL;

-- name: all_tokens
SELECT * FROM lc_tokens ORDER BY created_at, token_id;

-- name: revoke_token
UPDATE lc_tokens SET revoked_at = :now WHERE token_id = :token_id AND revoked_at IS NULL;

-- name: extend_deadline
UPDATE lc_jobs SET deadline_at = :now + :seconds, updated_at = :now
WHERE job_id = :job_id AND state = 'started'
RETURNING *;

-- name: changed_jobs
-- Jobs in the order of their last change, from a point on (event streams).
SELECT * FROM lc_jobs
WHERE (updated_at > :since OR (updated_at = :since AND job_id > :after_id))
  AND (:user_id IS NULL OR user_id = :user_id)
  AND (:session_id IS NULL OR session_id = :session_id)
  AND (:tool_name IS NULL OR tool_name = :tool_name)
ORDER BY updated_at, job_id
LIMIT :limit;

-- name: last_change
SELECT MAX(updated_at) AS at FROM lc_jobs;
