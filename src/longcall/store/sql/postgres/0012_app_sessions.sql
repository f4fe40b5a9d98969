-- longcall schema 12 (PostgreSQL): a session's lease is scoped by ADK app and user. ADK names
-- a session by (app, user, session id), and several apps (an `adk api_server` agents folder)
-- share one database: the same session id in two apps (or of two users) is two
-- conversations, each with its own lease and its own fence. Rows from before keep their
-- fences under the empty app and user; none of them is taken again.
ALTER TABLE lc_session_leases ADD COLUMN app_name TEXT NOT NULL DEFAULT '';
ALTER TABLE lc_session_leases ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE lc_session_leases DROP CONSTRAINT lc_session_leases_pkey;
ALTER TABLE lc_session_leases ADD PRIMARY KEY (app_name, user_id, session_id);
