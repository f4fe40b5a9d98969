-- The dashboard's logins (schema 9).
-- Every name here exists in sqlite/queries_logins.sql too.

-- name: insert_login
-- A login made from a live token; no row (0 changed) when the token is unknown or revoked.
INSERT INTO lc_logins (login_hash, token_id, created_at, expires_at)
SELECT %(login_hash)s, token_id, lc_now(%(now)s), lc_now(%(now)s) + %(ttl)s
FROM lc_tokens WHERE token_hash = %(token_hash)s AND revoked_at IS NULL;

-- name: login_by_hash
-- A login and the token it was made from, whether or not it has expired; none once the
-- token is revoked.
SELECT l.login_hash, l.created_at, l.expires_at, l.expires_at <= lc_now(%(now)s) AS expired,
       t.token_id, t.user_id, t.admin
FROM lc_logins l JOIN lc_tokens t ON t.token_id = l.token_id
WHERE l.login_hash = %(login_hash)s AND t.revoked_at IS NULL;

-- name: delete_login
DELETE FROM lc_logins WHERE login_hash = %(login_hash)s;

-- name: prune_logins
-- Logins that can no longer be used: expired, or made from a token since revoked.
DELETE FROM lc_logins
WHERE expires_at <= lc_now(%(now)s)
   OR token_id IN (SELECT token_id FROM lc_tokens WHERE revoked_at IS NOT NULL);
