-- longcall schema 19: workflow versions. A run records the version of the workflow that
-- started it (``@app.workflow(version=...)``); a worker claims only runs of the (workflow,
-- version) pairs it has registered. Runs made before this schema are version '1', the
-- version a workflow has when it declares none.
ALTER TABLE lc_runs ADD COLUMN version TEXT NOT NULL DEFAULT '1';
