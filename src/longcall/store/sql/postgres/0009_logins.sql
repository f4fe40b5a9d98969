-- longcall schema 9 (PostgreSQL): the dashboard's logins. The browser's cookie holds a random
-- login id; only its SHA-256 digest is kept here, so reading this table logs no one in. A
-- login ends when it expires, when its user logs out (the row is deleted) or when the token
-- it was made from is revoked (a login is found only through a live token).
CREATE TABLE lc_logins (
    login_hash  TEXT PRIMARY KEY,
    token_id    TEXT NOT NULL REFERENCES lc_tokens (token_id) ON DELETE CASCADE,
    created_at  DOUBLE PRECISION NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX lc_logins_expires ON lc_logins (expires_at);
