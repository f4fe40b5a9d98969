-- longcall schema 13 (SQLite): the scripted agent's sessions leave the production schema.
-- They were the transcripts of longcall's offline test and demo agent, not part of the job
-- table's contract; longcall.testing keeps them in tables of its own, made on first use.
DROP TABLE lc_session_events;
DROP TABLE lc_sessions;
