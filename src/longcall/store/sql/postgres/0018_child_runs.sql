-- longcall schema 18: child workflows. A run started by another run's ctx.start_child names
-- its parent and the key it was started under; the unique index makes that start happen
-- once, however often the parent replays it or dies around it. on_parent_cancel says whether
-- cancelling the parent cancels the child ('cancel') or leaves it running ('abandon').
-- A parent waiting in handle.result() is queued with recv_topic 'longcall.child:<child id>'
-- (so it shows as sleeping); the child's end wakes it.
ALTER TABLE lc_runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE lc_runs ADD COLUMN child_key TEXT;
ALTER TABLE lc_runs ADD COLUMN on_parent_cancel TEXT;
CREATE UNIQUE INDEX lc_runs_children ON lc_runs (parent_run_id, child_key)
    WHERE parent_run_id IS NOT NULL;
