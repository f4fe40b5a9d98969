-- Listing workflow runs (the API's GET /v1/runs and `longcall runs list`).
-- Every name here exists in sqlite/queries_runs_list.sql too.

-- name: list_runs
-- Newest first; ``before_*`` is the (created_at, run_id) of the last run of the previous page.
SELECT * FROM lc_runs
-- A sleeping run is stored as queued with a wake_at: it lists as 'sleeping', not 'queued'.
WHERE (%(status)s::text IS NULL
       OR (CASE WHEN status = 'queued' AND (wake_at IS NOT NULL OR recv_topic IS NOT NULL)
                 THEN 'sleeping' ELSE status END)
          = %(status)s)
  AND (%(workflow_id)s::text IS NULL OR workflow_id = %(workflow_id)s)
  AND (%(version)s::text IS NULL OR version = %(version)s)
  AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
  AND (%(before_created)s::float8 IS NULL OR created_at < %(before_created)s
       OR (created_at = %(before_created)s AND run_id < %(before_id)s))
ORDER BY created_at DESC, run_id DESC
LIMIT %(limit)s;

-- name: runs_of_job
-- The background runs doing a job's work (one, unless a caller gave its own idempotency key).
SELECT * FROM lc_runs WHERE job_id = %(job_id)s ORDER BY created_at, run_id;

-- name: run_backlog
-- Runs not finished, by status, and when the oldest queued one became claimable. Sleeping
-- runs (queued with a wake_at) are counted apart: they are no work to do until they wake.
SELECT CASE WHEN status = 'queued' AND (wake_at IS NOT NULL OR recv_topic IS NOT NULL)
                 THEN 'sleeping' ELSE status END
           AS status,
       COUNT(*) AS n, MIN(available_at) AS oldest FROM lc_runs
WHERE status IN ('queued', 'running', 'waiting_input')
GROUP BY 1;

-- name: run_versions
-- Runs not finished, by workflow, version and status (sleeping apart, as in run_backlog),
-- with the oldest one's creation: an old version has drained once it has no row here.
SELECT workflow_id, version,
       CASE WHEN status = 'queued' AND (wake_at IS NOT NULL OR recv_topic IS NOT NULL)
            THEN 'sleeping' ELSE status END AS status,
       COUNT(*) AS n, MIN(created_at) AS oldest FROM lc_runs
WHERE status IN ('queued', 'running', 'waiting_input')
  /*if workflow_id*/ AND workflow_id = %(workflow_id)s
  /*if user_id*/ AND user_id = %(user_id)s
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;
