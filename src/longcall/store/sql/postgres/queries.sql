-- Named queries for PostgreSQL. Every name here exists in sqlite/queries.sql too.
-- Parameters are %(named)s. lc_now(%(now)s) is the database's clock unless a test clock
-- passes a time: leases and deadlines are compared on one clock for every host.

-- name: insert_job
INSERT INTO lc_jobs (job_id, tool_name, args, app_name, user_id, session_id, call_id,
                     invocation_id, deadline_at, created_at, updated_at, attached_at, cancel_hook,
                     trace_context)
VALUES (%(job_id)s, %(tool_name)s, %(args)s::jsonb, %(app_name)s, %(user_id)s, %(session_id)s, %(call_id)s,
        %(invocation_id)s, lc_now(%(now)s) + %(deadline)s, lc_now(%(now)s), lc_now(%(now)s),
        CASE WHEN %(session_id)s::text IS NOT NULL AND %(call_id)s::text IS NOT NULL
             THEN lc_now(%(now)s) END, %(cancel_hook)s, %(trace_context)s)
ON CONFLICT (job_id) DO NOTHING
RETURNING *;

-- name: get_job
SELECT * FROM lc_jobs WHERE job_id = %(job_id)s;

-- name: get_job_for_update
SELECT * FROM lc_jobs WHERE job_id = %(job_id)s FOR UPDATE;

-- name: abandon_job
DELETE FROM lc_jobs WHERE job_id = %(job_id)s AND state = 'started'
  AND EXISTS (SELECT 1 FROM lc_outbox o WHERE o.job_id = lc_jobs.job_id AND o.kind = 'dispatch');

-- name: get_job_of_call
-- The job already joined to this function call (the lc_jobs_call index: session, call, user).
SELECT * FROM lc_jobs
WHERE session_id = %(session_id)s AND call_id = %(call_id)s
  AND COALESCE(user_id, '') = COALESCE(%(user_id)s::text, '');

-- name: set_pending
-- What the tool answered when it submitted the work; the first answer recorded stays.
UPDATE lc_jobs SET
    pending_message = COALESCE(pending_message, %(message)s),
    pending_fields = COALESCE(pending_fields, %(fields)s::jsonb),
    updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND (pending_message IS NULL OR pending_fields IS NULL);

-- name: attach_job
UPDATE lc_jobs SET
    app_name = COALESCE(app_name, %(app_name)s),
    user_id = COALESCE(user_id, %(user_id)s),
    session_id = COALESCE(session_id, %(session_id)s),
    call_id = COALESCE(call_id, %(call_id)s),
    invocation_id = COALESCE(invocation_id, %(invocation_id)s),
    delivery = CASE
        WHEN delivery = 'none' AND COALESCE(session_id, %(session_id)s) IS NOT NULL
             AND COALESCE(call_id, %(call_id)s) IS NOT NULL
             AND (state <> 'started' OR notify_seq > notified_seq) THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery = 'none' AND COALESCE(session_id, %(session_id)s) IS NOT NULL
             AND COALESCE(call_id, %(call_id)s) IS NOT NULL
             AND (state <> 'started' OR notify_seq > notified_seq) THEN lc_now(%(now)s)
        ELSE available_at END,
    attached_at = CASE
        WHEN attached_at IS NULL AND COALESCE(session_id, %(session_id)s) IS NOT NULL
             AND COALESCE(call_id, %(call_id)s) IS NOT NULL THEN lc_now(%(now)s)
        ELSE attached_at END,
    updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s
RETURNING *;

-- name: finish_job
-- The conditional terminal update: only a started job changes, so the first result wins,
-- and only before its deadline: from deadline_at on (the sweeper's overdue_jobs rule,
-- on the same clock) only the deadline answers, by expire_job.
UPDATE lc_jobs SET
    state = %(state)s,
    result = %(result)s::jsonb,
    finished_at = lc_now(%(now)s),
    updated_at = lc_now(%(now)s),
    event_seq = event_seq + 1,
    -- 'failed' here can only be a given-up progress announcement: the final result still goes.
    delivery = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN lc_now(%(now)s)
        WHEN delivery = 'ready' AND claim_holder IS NULL THEN LEAST(available_at, lc_now(%(now)s))
        ELSE available_at END,
    attempts = CASE WHEN delivery = 'failed' THEN 0 ELSE attempts END
WHERE job_id = %(job_id)s AND state = 'started'
  AND (%(state)s = 'expired' OR deadline_at IS NULL OR deadline_at > lc_now(%(now)s))
RETURNING *;

-- name: expire_job
-- The deadline's answer: a started job whose deadline has passed becomes expired (the
-- sweeper, or a result that came too late). Not once the deadline was moved past now.
UPDATE lc_jobs SET
    state = 'expired',
    result = %(result)s::jsonb,
    finished_at = lc_now(%(now)s),
    updated_at = lc_now(%(now)s),
    event_seq = event_seq + 1,
    -- 'failed' here can only be a given-up progress announcement: the final result still goes.
    delivery = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready'
        ELSE delivery END,
    available_at = CASE
        WHEN delivery IN ('none', 'failed') AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN lc_now(%(now)s)
        WHEN delivery = 'ready' AND claim_holder IS NULL THEN LEAST(available_at, lc_now(%(now)s))
        ELSE available_at END,
    attempts = CASE WHEN delivery = 'failed' THEN 0 ELSE attempts END
WHERE job_id = %(job_id)s AND state = 'started' AND deadline_at <= lc_now(%(now)s)
RETURNING *;

-- name: record_progress
UPDATE lc_jobs SET
    progress = %(data)s::jsonb,
    event_seq = event_seq + 1,
    progress_seq = event_seq + 1,
    notify_seq = CASE WHEN %(notify)s::boolean THEN event_seq + 1 ELSE notify_seq END,
    delivery = CASE
        WHEN %(notify)s::boolean AND delivery = 'none' AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN 'ready' ELSE delivery END,
    available_at = CASE
        WHEN %(notify)s::boolean AND delivery = 'none' AND session_id IS NOT NULL AND call_id IS NOT NULL
        THEN GREATEST(lc_now(%(now)s), COALESCE(notified_at + %(throttle)s, lc_now(%(now)s))) ELSE available_at END,
    updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND state = 'started'
RETURNING *;

-- name: bump_event_seq
UPDATE lc_jobs SET event_seq = event_seq + 1 WHERE job_id = %(job_id)s RETURNING event_seq;

-- name: insert_event
INSERT INTO lc_job_events (job_id, seq, kind, data, created_at)
VALUES (%(job_id)s, %(seq)s, %(kind)s, %(data)s::jsonb, lc_now(%(now)s));

-- name: job_events
SELECT * FROM lc_job_events WHERE job_id = %(job_id)s AND seq > %(after)s ORDER BY seq;

-- name: claim_candidates
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
-- Ready jobs of every app whose session nobody is running right now, oldest first.
SELECT j.* FROM lc_jobs j
WHERE j.delivery = 'ready' AND j.available_at <= lc_now(%(now)s)
  AND NOT EXISTS (SELECT 1 FROM lc_session_leases l
                  WHERE l.app_name = COALESCE(j.app_name, '') AND l.user_id = COALESCE(j.user_id, '')
                    AND l.session_id = j.session_id AND l.expires_at > lc_now(%(now)s))
ORDER BY j.available_at, j.job_id
LIMIT {limit}
FOR UPDATE OF j SKIP LOCKED;

-- name: claim_candidates_for_app
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
-- One app's ready jobs, and those of no app (which the claim gives to it), whose
-- session nobody is running right now, oldest first.
SELECT j.* FROM lc_jobs j
WHERE j.delivery = 'ready' AND j.available_at <= lc_now(%(now)s)
  AND (j.app_name = %(app_name)s OR j.app_name IS NULL)
  AND NOT EXISTS (SELECT 1 FROM lc_session_leases l
                  WHERE l.app_name = COALESCE(j.app_name, %(app_name)s::text) AND l.user_id = COALESCE(j.user_id, '')
                    AND l.session_id = j.session_id AND l.expires_at > lc_now(%(now)s))
ORDER BY j.available_at, j.job_id
LIMIT {limit}
FOR UPDATE OF j SKIP LOCKED;

-- name: session_ready_jobs
-- The rest of a session's ready jobs, once its lease is held; with ``unscoped``, those of no
-- app too. (Ready jobs always have a call id; saying so lets the (session_id, call_id) index
-- serve the lookup.)
SELECT * FROM lc_jobs
WHERE call_id IS NOT NULL AND session_id = %(session_id)s
  AND COALESCE(user_id, '') = %(user_id)s
  AND (app_name = %(app_name)s OR (app_name IS NULL AND %(unscoped)s::boolean))
  AND delivery = 'ready' AND available_at <= lc_now(%(now)s)
ORDER BY available_at, job_id
FOR UPDATE SKIP LOCKED;

-- name: claim_job
-- A job of no app becomes the claiming app's: its lease is that app's session's.
UPDATE lc_jobs SET claim_holder = %(holder)s, claim_fence = %(fence)s,
                   app_name = COALESCE(app_name, %(app_name)s::text),
                   available_at = lc_now(%(now)s) + %(lease)s, attempts = attempts + 1,
                   updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND delivery = 'ready'
RETURNING *;

-- name: renew_job_claim
UPDATE lc_jobs SET available_at = lc_now(%(now)s) + %(lease)s
WHERE job_id = %(job_id)s AND claim_holder = %(holder)s
  AND claim_fence IS NOT DISTINCT FROM %(fence)s::bigint
  AND delivery = 'ready';

-- name: mark_final_delivered
-- This and the other outcomes of a claim count only while its holder still holds the
-- job's session under the claim's fence: one that lost it (to another worker or a user
-- turn) records nothing, and the job goes back once its claim runs out.
UPDATE lc_jobs SET delivery = 'delivered', delivered_at = lc_now(%(now)s), claim_holder = NULL,
                   available_at = NULL, attempts = 0, last_error = NULL, updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND claim_holder = %(holder)s
  AND claim_fence IS NOT DISTINCT FROM %(fence)s::bigint
  AND delivery = 'ready' AND state <> 'started'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = %(holder)s AND l.fence = %(fence)s);

-- name: mark_progress_delivered
UPDATE lc_jobs SET
    notified_seq = %(seq)s,
    notified_at = lc_now(%(now)s),
    claim_holder = NULL,
    attempts = 0,
    delivery = CASE WHEN state <> 'started' OR notify_seq > %(seq)s THEN 'ready' ELSE 'none' END,
    available_at = CASE WHEN state <> 'started' THEN lc_now(%(now)s)
                        WHEN notify_seq > %(seq)s THEN lc_now(%(now)s) + %(throttle)s
                        ELSE NULL END,
    updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND claim_holder = %(holder)s
  AND claim_fence IS NOT DISTINCT FROM %(fence)s::bigint
  AND delivery = 'ready'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = %(holder)s AND l.fence = %(fence)s);

-- name: release_job
-- A delivery that did not happen: retry later, or give up visibly (failed / orphaned).
UPDATE lc_jobs SET claim_holder = NULL, last_error = %(error)s, delivery = %(delivery)s,
                   available_at = lc_now(%(now)s) + %(delay)s, updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND claim_holder = %(holder)s
  AND claim_fence IS NOT DISTINCT FROM %(fence)s::bigint
  AND delivery = 'ready'
  AND EXISTS (SELECT 1 FROM lc_session_leases l
              WHERE l.app_name = COALESCE(lc_jobs.app_name, '')
              AND l.user_id = COALESCE(lc_jobs.user_id, '') AND l.session_id = lc_jobs.session_id
              AND l.holder = %(holder)s AND l.fence = %(fence)s);

-- name: redeliver_job
-- An orphaned or given-up delivery, once its cause is fixed: ready again with fresh attempts,
-- optionally for another app.
UPDATE lc_jobs SET delivery = 'ready', available_at = lc_now(%(now)s), attempts = 0, claim_holder = NULL,
                   last_error = NULL, app_name = COALESCE(%(app_name)s::text, app_name),
                   updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND delivery IN ('orphaned', 'failed')
RETURNING *;

-- name: overdue_jobs
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
SELECT * FROM lc_jobs WHERE state = 'started' AND deadline_at <= lc_now(%(now)s)
ORDER BY deadline_at LIMIT {limit}
FOR UPDATE SKIP LOCKED;

-- name: list_jobs
-- Each filter line is sent only when its value is given (queries.OPTIONAL_MARK), and the
-- statement with its values written in (queries.PLANNED_WITH_VALUES).
SELECT * FROM lc_jobs
WHERE TRUE
  /*if state*/ AND state = %(state)s
  /*if tool_name*/ AND tool_name = %(tool_name)s
  /*if session_id*/ AND session_id = %(session_id)s
  /*if user_id*/ AND user_id = %(user_id)s
  /*if delivery*/ AND delivery = %(delivery)s
  -- The search box: a pattern with the user's % _ and \ escaped, any case.
  /*if pattern*/ AND (job_id ILIKE %(pattern)s ESCAPE '\'
  /*if pattern*/      OR tool_name ILIKE %(pattern)s ESCAPE '\' OR session_id ILIKE %(pattern)s ESCAPE '\'
  /*if pattern*/      OR user_id ILIKE %(pattern)s ESCAPE '\' OR call_id ILIKE %(pattern)s ESCAPE '\'
  /*if pattern*/      OR args::text ILIKE %(pattern)s ESCAPE '\')
  /*if before_created*/ AND (created_at < %(before_created)s
  /*if before_created*/      OR (created_at = %(before_created)s AND job_id < %(before_id)s))
ORDER BY created_at DESC, job_id DESC
LIMIT %(limit)s;

-- name: search_jobs
-- A search that reads at most %(window)s jobs (the newest that pass the filters, from the
-- cursor on), whatever the size of the table: the matches among them, newest first, and the
-- last job read (nth = %(window)s) when the window was full, where the next search goes on.
SELECT * FROM (
    SELECT jobs.*, ROW_NUMBER() OVER (ORDER BY created_at DESC, job_id DESC) AS nth,
           (job_id ILIKE %(pattern)s ESCAPE '\' OR tool_name ILIKE %(pattern)s ESCAPE '\'
            OR session_id ILIKE %(pattern)s ESCAPE '\' OR user_id ILIKE %(pattern)s ESCAPE '\'
            OR call_id ILIKE %(pattern)s ESCAPE '\' OR args::text ILIKE %(pattern)s ESCAPE '\')
               IS TRUE AS hit
    FROM (
        SELECT * FROM lc_jobs
        WHERE TRUE
          /*if state*/ AND state = %(state)s
          /*if tool_name*/ AND tool_name = %(tool_name)s
          /*if session_id*/ AND session_id = %(session_id)s
          /*if user_id*/ AND user_id = %(user_id)s
          /*if delivery*/ AND delivery = %(delivery)s
          /*if before_created*/ AND (created_at < %(before_created)s
          /*if before_created*/      OR (created_at = %(before_created)s AND job_id < %(before_id)s))
        ORDER BY created_at DESC, job_id DESC
        LIMIT %(window)s
    ) AS jobs
) AS scanned
WHERE hit OR nth = %(window)s
ORDER BY created_at DESC, job_id DESC
LIMIT %(limit)s + 1;

-- name: count_jobs
-- Kept by the triggers of schema 14: the folded counts and the changes not yet folded, read
-- in one snapshot.
SELECT state, delivery, SUM(n)::bigint AS n FROM (
    SELECT state, delivery, n FROM lc_job_counts
    UNION ALL
    SELECT state, delivery, n FROM lc_job_count_changes
) AS counted
GROUP BY state, delivery
HAVING SUM(n) <> 0;

-- name: fold_job_counts
-- The changes counted so far, added to lc_job_counts and gone from lc_job_count_changes, in
-- one statement. A fold that runs at the same time waits on the rows this one deletes and
-- then skips them; the counts rows are taken in one order, so two folds cannot deadlock.
WITH moved AS (
    DELETE FROM lc_job_count_changes RETURNING state, delivery, n
)
INSERT INTO lc_job_counts (state, delivery, n)
SELECT state, delivery, SUM(n) FROM moved GROUP BY state, delivery ORDER BY state, delivery
ON CONFLICT (state, delivery) DO UPDATE SET n = lc_job_counts.n + excluded.n;

-- name: take_session_lease
-- Every take raises the session's fence, a renewal by the same holder too: a delivery still
-- running under the lease's earlier take is fenced off from the new one.
INSERT INTO lc_session_leases (app_name, user_id, session_id, holder, kind, expires_at, fence)
VALUES (%(app_name)s, %(user_id)s, %(session_id)s, %(holder)s, %(kind)s, lc_now(%(now)s) + %(ttl)s, 1)
ON CONFLICT (app_name, user_id, session_id) DO UPDATE SET
    holder = excluded.holder, kind = excluded.kind, expires_at = excluded.expires_at,
    fence = lc_session_leases.fence + 1
WHERE lc_session_leases.expires_at <= lc_now(%(now)s) OR lc_session_leases.holder = excluded.holder
RETURNING holder, fence;

-- name: renew_session_lease
-- A user turn's lease: its holder is its own, so the holder alone must match.
UPDATE lc_session_leases SET expires_at = lc_now(%(now)s) + %(ttl)s
WHERE app_name = %(app_name)s AND user_id = %(user_id)s AND session_id = %(session_id)s
  AND holder = %(holder)s;

-- name: renew_fenced_session_lease
-- A delivery's lease: only under the fence it was claimed with.
UPDATE lc_session_leases SET expires_at = lc_now(%(now)s) + %(ttl)s
WHERE app_name = %(app_name)s AND user_id = %(user_id)s AND session_id = %(session_id)s
  AND holder = %(holder)s AND fence = %(fence)s;

-- name: release_session_lease
-- The row stays (emptied and expired) so that the session's fence keeps rising.
UPDATE lc_session_leases SET holder = '', expires_at = 0
WHERE app_name = %(app_name)s AND user_id = %(user_id)s AND session_id = %(session_id)s
  AND holder = %(holder)s;

-- name: release_fenced_session_lease
-- A delivery's release: only the take its claim was made under, so a delivery ending late
-- never frees the lease a newer claim of the same holder took.
UPDATE lc_session_leases SET holder = '', expires_at = 0
WHERE app_name = %(app_name)s AND user_id = %(user_id)s AND session_id = %(session_id)s
  AND holder = %(holder)s AND fence = %(fence)s;

-- name: session_fence_held
-- Whether a fenced holder still holds the session: nobody took it since, and it has not run out.
SELECT 1 AS held FROM lc_session_leases
WHERE app_name = %(app_name)s AND user_id = %(user_id)s AND session_id = %(session_id)s
  AND holder = %(holder)s AND fence = %(fence)s
  AND expires_at > lc_now(%(now)s);

-- name: session_delivery_calls
-- Which of ``call_ids`` (a JSON array) a live delivery holds on a session: its jobs claimed
-- under the lease's holder and fence. A user turn's lease, or one that ran out, holds none.
-- The jobs are found by session and call, the lookup the (session_id, call_id) index serves:
-- no test of delivery = 'ready', which a claim implies (every way out of it clears the
-- claim) and which would offer the planner the ready jobs' index instead.
SELECT j.call_id FROM lc_session_leases l
JOIN lc_jobs j ON j.claim_holder = l.holder AND j.claim_fence = l.fence
WHERE l.app_name = %(app_name)s AND l.user_id = %(user_id)s AND l.session_id = %(session_id)s
  AND l.kind = 'resume' AND l.holder <> '' AND l.expires_at > lc_now(%(now)s)
  AND j.session_id = %(session_id)s AND j.call_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%(call_ids)s::jsonb)))
  AND COALESCE(j.user_id, '') = %(user_id)s AND COALESCE(j.app_name, '') = %(app_name)s;

-- name: insert_outbox
INSERT INTO lc_outbox (job_id, kind, available_at, holder, created_at)
VALUES (%(job_id)s, %(kind)s, lc_now(%(now)s) + %(delay)s, %(holder)s, lc_now(%(now)s))
ON CONFLICT (job_id, kind) DO NOTHING;

-- name: delete_outbox
DELETE FROM lc_outbox WHERE job_id = %(job_id)s AND kind = %(kind)s;

-- name: outbox_candidates
-- Its LIMIT is written in, not a parameter, so that its plan is kept (queries.LIMIT_MARK).
SELECT o.*, j.tool_name, j.args FROM lc_outbox o JOIN lc_jobs j ON j.job_id = o.job_id
WHERE o.available_at <= lc_now(%(now)s)
ORDER BY o.available_at
LIMIT {limit}
FOR UPDATE OF o SKIP LOCKED;

-- name: claim_outbox
UPDATE lc_outbox SET holder = %(holder)s, available_at = lc_now(%(now)s) + %(lease)s, attempts = attempts + 1
WHERE job_id = %(job_id)s AND kind = %(kind)s
RETURNING attempts;

-- name: retry_outbox
UPDATE lc_outbox SET holder = NULL, available_at = lc_now(%(now)s) + %(delay)s, last_error = %(error)s
WHERE job_id = %(job_id)s AND kind = %(kind)s AND holder = %(holder)s;

-- name: notify
SELECT pg_notify(%(channel)s, %(payload)s);

-- name: insert_inbox
-- First sight of a delivery; a repeat (same source and id) inserts nothing. A concurrent
-- repeat waits for the first one's commit on the primary key, then inserts nothing.
INSERT INTO lc_inbox (source, delivery_id, job_id, kind, outcome, received_at)
VALUES (%(source)s, %(delivery_id)s, %(job_id)s, %(kind)s, 'received', lc_now(%(now)s))
ON CONFLICT (source, delivery_id) DO NOTHING
RETURNING delivery_id;

-- name: set_inbox_outcome
UPDATE lc_inbox SET outcome = %(outcome)s
WHERE source = %(source)s AND delivery_id = %(delivery_id)s;

-- name: job_inbox
SELECT * FROM lc_inbox WHERE job_id = %(job_id)s ORDER BY received_at, delivery_id;

-- name: insert_early_result
INSERT INTO lc_early_results (job_id, state, result, source, delivery_id, received_at)
VALUES (%(job_id)s, %(state)s, %(result)s::jsonb, %(source)s, %(delivery_id)s,
        lc_now(%(now)s))
ON CONFLICT (job_id) DO NOTHING;

-- name: take_early_result
DELETE FROM lc_early_results WHERE job_id = %(job_id)s RETURNING *;

-- name: insert_hook_secret
INSERT INTO lc_webhook_secrets (source, secret_id, secret, created_at)
VALUES (%(source)s, %(secret_id)s, %(secret)s, lc_now(%(now)s));

-- name: hook_secrets
SELECT * FROM lc_webhook_secrets WHERE source = %(source)s ORDER BY created_at, secret_id;

-- name: all_hook_secrets
SELECT * FROM lc_webhook_secrets ORDER BY source, created_at, secret_id;

-- name: delete_hook_secret
DELETE FROM lc_webhook_secrets WHERE source = %(source)s AND secret_id = %(secret_id)s;

-- name: insert_token
INSERT INTO lc_tokens (token_id, token_hash, user_id, admin, created_at)
VALUES (%(token_id)s, %(token_hash)s, %(user_id)s, %(admin)s::boolean, lc_now(%(now)s));

-- name: token_by_hash
SELECT * FROM lc_tokens WHERE token_hash = %(token_hash)s AND revoked_at IS NULL;

-- name: all_tokens
SELECT * FROM lc_tokens ORDER BY created_at, token_id;

-- name: revoke_token
UPDATE lc_tokens SET revoked_at = lc_now(%(now)s)
WHERE token_id = %(token_id)s AND revoked_at IS NULL;

-- name: extend_deadline
UPDATE lc_jobs SET deadline_at = lc_now(%(now)s) + %(seconds)s, updated_at = lc_now(%(now)s)
WHERE job_id = %(job_id)s AND state = 'started'
RETURNING *;

-- name: changed_jobs
-- Jobs in the order of their last change, from a point on (event streams).
SELECT * FROM lc_jobs
WHERE (updated_at > %(since)s OR (updated_at = %(since)s AND job_id > %(after_id)s))
  AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
  AND (%(session_id)s::text IS NULL OR session_id = %(session_id)s)
  AND (%(tool_name)s::text IS NULL OR tool_name = %(tool_name)s)
ORDER BY updated_at, job_id
LIMIT %(limit)s;

-- name: last_change
SELECT MAX(updated_at) AS at FROM lc_jobs;
