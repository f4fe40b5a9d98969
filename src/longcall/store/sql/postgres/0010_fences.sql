-- longcall schema 10 (PostgreSQL): fencing tokens. Every take of a session's lease raises its
-- fence by one, and a job remembers the fence it was claimed under; a holder that lost its
-- claim (it stalled past its lease and someone took the session) carries an older fence, so
-- the writes it attempts afterwards match nothing. A released lease keeps its row (holder
-- emptied, already expired), so a session's fence never starts again from zero.
ALTER TABLE lc_session_leases ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lc_jobs ADD COLUMN claim_fence BIGINT;
