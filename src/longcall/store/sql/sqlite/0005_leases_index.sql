-- longcall schema 5: the index of leased runs also requires a lease. With only
-- status = 'running' for a predicate, one that every statement finding a running run by id
-- also states, the planner without statistics (a new database, autovacuum off or behind)
-- walked that whole index, dead entries included, instead of the primary key. The lease
-- condition keeps those statements off it; the takeover scan states both.
DROP INDEX lc_runs_leased;
CREATE INDEX lc_runs_leased ON lc_runs (lease_expires_at)
    WHERE status = 'running' AND lease_expires_at IS NOT NULL;
