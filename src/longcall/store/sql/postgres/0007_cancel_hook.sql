-- longcall schema 7 (PostgreSQL): whether the tool that created a job declared an on_cancel
-- hook. A cancel or an expiry queues the hook's outbox item only for a job whose tool has
-- one, so no worker retries a hook that exists nowhere (a job created over POST /v1/jobs for
-- a tool outside Python has none). Jobs created before this are taken to have one: asking a
-- worker for a hook that is missing is noisy, losing a hook call that exists is worse.
ALTER TABLE lc_jobs ADD COLUMN cancel_hook BOOLEAN NOT NULL DEFAULT TRUE;
