-- Child workflows (schema 18): runs started by a run's ctx.start_child.
-- Every name here exists in sqlite/queries_run_children.sql too.

-- name: insert_child_run
-- Queued for a worker; nothing when the parent started a child under this key before.
INSERT INTO lc_runs (run_id, workflow_id, status, input, user_id, available_at, executions,
                     parent_run_id, child_key, on_parent_cancel, version, created_at, updated_at)
VALUES (%(run_id)s, %(workflow_id)s, 'queued', %(input)s::jsonb, %(user_id)s, lc_now(%(now)s),
        0, %(parent_run_id)s, %(child_key)s, %(on_parent_cancel)s, %(version)s, lc_now(%(now)s),
        lc_now(%(now)s))
ON CONFLICT DO NOTHING
RETURNING run_id;

-- name: child_by_key
SELECT * FROM lc_runs WHERE parent_run_id = %(parent_run_id)s AND child_key = %(child_key)s;

-- name: child_runs
SELECT * FROM lc_runs WHERE parent_run_id = %(parent_run_id)s ORDER BY created_at, run_id;

-- name: children_to_cancel
-- The children a cancelled parent takes down with it: not finished, not abandoned.
SELECT run_id FROM lc_runs
WHERE parent_run_id = %(parent_run_id)s AND on_parent_cancel = 'cancel'
  AND status IN ('queued', 'running', 'waiting_input') AND NOT cancel_requested;

-- name: wake_parent
-- A child has ended: its parent, if it waits in the child's handle.result(), wakes now.
-- The statement always updates (so locks) the parent's row: a parent suspending at the same
-- moment either is seen waiting here, or sees the child ended (see wake_for_child).
UPDATE lc_runs SET available_at = CASE WHEN status = 'queued' AND recv_topic = %(topic)s
                                       THEN lc_now(%(now)s) ELSE available_at END
WHERE run_id = %(parent_run_id)s
RETURNING status = 'queued' AND recv_topic IS NOT DISTINCT FROM %(topic)s AS woke;

-- name: wake_for_child
-- As a parent suspends in handle.result(): a child that has ended meanwhile wakes it now.
UPDATE lc_runs SET available_at = lc_now(%(now)s)
WHERE run_id = %(run_id)s AND status = 'queued' AND recv_topic = %(topic)s
  AND EXISTS (SELECT 1 FROM lc_runs c
              WHERE c.run_id = %(child_run_id)s
                AND c.status IN ('completed', 'failed', 'cancelled'))
RETURNING run_id;
