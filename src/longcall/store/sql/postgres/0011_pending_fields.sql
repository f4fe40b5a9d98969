-- longcall schema 11 (PostgreSQL): the fields a long-running tool returned beside its message
-- (a ticket id, an amount), kept so that every pending answer for the job carries them: the
-- first call's, a repeated call's, and the worker's after it re-submitted the work.
ALTER TABLE lc_jobs ADD COLUMN pending_fields JSONB;
