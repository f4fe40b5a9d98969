-- longcall schema 16: a user's listing filtered by state (every request with a user's token
-- and ?state=) reads that user's jobs in that state, newest first, from one index. Without it
-- PostgreSQL combines the user's index with the partial index of every started job, a cost
-- that grows with the table.
CREATE INDEX lc_jobs_user_state_created ON lc_jobs (user_id, state, created_at, job_id);
