-- longcall schema 22: forks. A run started by app.fork_run records the run it was forked
-- from and the step it executes from; the steps before that one were copied from the
-- original when the fork was created, and replay without executing.
ALTER TABLE lc_runs ADD COLUMN forked_from TEXT;
ALTER TABLE lc_runs ADD COLUMN forked_step INTEGER;
