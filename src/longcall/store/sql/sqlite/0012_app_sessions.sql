-- longcall schema 12 (SQLite): a session's lease is scoped by ADK app and user. ADK names a
-- session by (app, user, session id), and several apps (an `adk api_server` agents folder)
-- share one database: the same session id in two apps (or of two users) is two
-- conversations, each with its own lease and its own fence. Rows from before keep their
-- fences under the empty app and user; none of them is taken again. SQLite cannot change a
-- primary key in place: the table is built again.
ALTER TABLE lc_session_leases RENAME TO lc_session_leases_10;
CREATE TABLE lc_session_leases (
    app_name    TEXT NOT NULL DEFAULT '',
    user_id     TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL,
    holder      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    expires_at  REAL NOT NULL,
    fence       INTEGER NOT NULL DEFAULT 0,  -- schema 10: raised by every take
    PRIMARY KEY (app_name, user_id, session_id)
);
INSERT INTO lc_session_leases (session_id, holder, kind, expires_at, fence)
SELECT session_id, holder, kind, expires_at, fence FROM lc_session_leases_10;
DROP TABLE lc_session_leases_10;
