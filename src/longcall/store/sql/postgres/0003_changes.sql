-- longcall schema 3: event streams follow changes in the order they were made.
CREATE INDEX lc_jobs_updated ON lc_jobs (updated_at, job_id);
