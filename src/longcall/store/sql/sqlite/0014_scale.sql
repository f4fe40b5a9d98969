-- longcall schema 14 (SQLite): listings and metrics that cost the same at a million jobs as
-- at ten thousand, and what retention removes found without a scan.
-- A user's listing (every request with a user's token) and the tool and session filters
-- read their own index, newest first, instead of the whole table.
CREATE INDEX lc_jobs_user_created ON lc_jobs (user_id, created_at, job_id);
CREATE INDEX lc_jobs_tool_created ON lc_jobs (tool_name, created_at, job_id);
CREATE INDEX lc_jobs_session_created ON lc_jobs (session_id, created_at, job_id);
-- Jobs by (state, delivery), kept as jobs change: GET /metrics reads these few rows instead of
-- counting the table. One writer at a time on SQLite, so the triggers add to the rows
-- directly.
CREATE TABLE lc_job_counts (
    state    TEXT NOT NULL,
    delivery TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (state, delivery)
) WITHOUT ROWID;
INSERT INTO lc_job_counts (state, delivery, n)
SELECT state, delivery, COUNT(*) FROM lc_jobs GROUP BY state, delivery;
CREATE TRIGGER lc_jobs_counted AFTER INSERT ON lc_jobs BEGIN
    INSERT INTO lc_job_counts (state, delivery, n) VALUES (NEW.state, NEW.delivery, 1)
    ON CONFLICT (state, delivery) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lc_jobs_recounted AFTER UPDATE OF state, delivery ON lc_jobs
WHEN OLD.state IS NOT NEW.state OR OLD.delivery IS NOT NEW.delivery BEGIN
    UPDATE lc_job_counts SET n = n - 1 WHERE state = OLD.state AND delivery = OLD.delivery;
    INSERT INTO lc_job_counts (state, delivery, n) VALUES (NEW.state, NEW.delivery, 1)
    ON CONFLICT (state, delivery) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lc_jobs_uncounted AFTER DELETE ON lc_jobs BEGIN
    UPDATE lc_job_counts SET n = n - 1 WHERE state = OLD.state AND delivery = OLD.delivery;
END;
-- The metrics read the runs not finished (by status, and the oldest queued) from this
-- index: as many entries as there are open runs, whatever the size of the table. Status
-- is not a key of it: a run looked up by id and status must keep to the primary key.
CREATE INDEX lc_runs_open ON lc_runs (available_at)
    WHERE status IN ('queued', 'running', 'waiting_input');
-- Retention (the worker's pruner, `longcall prune`): deliveries from outside and early results
-- are removed oldest first, a small batch at a time, through these.
CREATE INDEX lc_inbox_received ON lc_inbox (received_at);
CREATE INDEX lc_early_results_received ON lc_early_results (received_at);
