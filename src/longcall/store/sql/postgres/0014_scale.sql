-- longcall schema 14 (PostgreSQL): listings and metrics that cost the same at a million jobs
-- as at ten thousand, and what retention removes found without a scan.
-- A user's listing (every request with a user's token) and the tool and session filters
-- read their own index, newest first, instead of the whole table.
CREATE INDEX lc_jobs_user_created ON lc_jobs (user_id, created_at, job_id);
CREATE INDEX lc_jobs_tool_created ON lc_jobs (tool_name, created_at, job_id);
CREATE INDEX lc_jobs_session_created ON lc_jobs (session_id, created_at, job_id);
-- Jobs by (state, delivery), kept as jobs change: GET /metrics reads these few rows instead of
-- counting the table. Many transactions change jobs at once here, and one counter row each
-- would make them wait on each other: each change appends +1 and -1 rows to
-- lc_job_count_changes, and folding those into lc_job_counts (the sweeper, and each reading
-- of the counts) keeps that table short.
CREATE TABLE lc_job_counts (
    state    TEXT NOT NULL,
    delivery TEXT NOT NULL,
    n        BIGINT NOT NULL,
    PRIMARY KEY (state, delivery)
);
CREATE TABLE lc_job_count_changes (
    state    TEXT NOT NULL,
    delivery TEXT NOT NULL,
    n        INTEGER NOT NULL
);
INSERT INTO lc_job_counts (state, delivery, n)
SELECT state, delivery, COUNT(*) FROM lc_jobs GROUP BY state, delivery;
CREATE FUNCTION lc_count_job_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO lc_job_count_changes (state, delivery, n) VALUES (OLD.state, OLD.delivery, -1);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO lc_job_count_changes (state, delivery, n) VALUES (NEW.state, NEW.delivery, 1);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER lc_jobs_counted AFTER INSERT OR DELETE ON lc_jobs
    FOR EACH ROW EXECUTE FUNCTION lc_count_job_change();
CREATE TRIGGER lc_jobs_recounted AFTER UPDATE OF state, delivery ON lc_jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.delivery IS DISTINCT FROM NEW.delivery)
    EXECUTE FUNCTION lc_count_job_change();
-- The metrics read the runs not finished (by status, and the oldest queued) from this
-- index: as many entries as there are open runs, whatever the size of the table. Status
-- is not a key of it: a run looked up by id and status must keep to the primary key.
CREATE INDEX lc_runs_open ON lc_runs (available_at)
    WHERE status IN ('queued', 'running', 'waiting_input');
-- Retention (the worker's pruner, `longcall prune`): deliveries from outside and early results
-- are removed oldest first, a small batch at a time, through these.
CREATE INDEX lc_inbox_received ON lc_inbox (received_at);
CREATE INDEX lc_early_results_received ON lc_early_results (received_at);
