-- longcall schema 8: a session is the pair (user, session id). Two users may each have a
-- session called "s1" with a call "c1"; one job per function call now means one per (user,
-- session, call). Jobs without a user (library use without users) count as the user '', so
-- they stay unique among themselves. The session id leads, so lookups of a session's ready
-- jobs still use the index.
DROP INDEX lc_jobs_call;
CREATE UNIQUE INDEX lc_jobs_call ON lc_jobs (session_id, call_id, COALESCE(user_id, ''))
    WHERE call_id IS NOT NULL;
