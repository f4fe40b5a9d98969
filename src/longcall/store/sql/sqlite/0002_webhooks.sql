-- longcall schema 2 (SQLite): deliveries from outside (deduplicated by their webhook id in
-- the same transaction as the change), early results, webhook secrets and API tokens.

CREATE TABLE lc_inbox (
    source       TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    received_at  REAL NOT NULL,
    PRIMARY KEY (source, delivery_id)
);
CREATE INDEX lc_inbox_job ON lc_inbox (job_id);

-- A terminal result for a job that does not exist yet; the job takes it when it is created.
CREATE TABLE lc_early_results (
    job_id       TEXT PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('succeeded', 'failed', 'cancelled')),
    result       TEXT,
    source       TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    received_at  REAL NOT NULL
);

-- Secrets that sign deliveries, per source; several at once while a sender rotates.
CREATE TABLE lc_webhook_secrets (
    source      TEXT NOT NULL,
    secret_id   TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (source, secret_id)
);

-- API bearer tokens, kept as a SHA-256 of the token; a user's token sees only that user's jobs.
CREATE TABLE lc_tokens (
    token_id    TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL UNIQUE,
    user_id     TEXT,
    admin       INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    revoked_at  REAL
);
