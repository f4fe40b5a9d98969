-- longcall schema 21: durable streams a run writes (ctx.stream) and clients read live.
-- seq numbers a stream's items from 1; origin says which write made the item (the body's
-- position and count, or the task's position, execution and attempt), so a write replayed on
-- resume inserts nothing. The item of origin 'end' (its value NULL) closes the stream
-- (ctx.close_stream); a stream whose run has finished is ended too, with or without one.
CREATE TABLE lc_run_streams (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    value       JSONB,
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key, seq),
    UNIQUE (run_id, key, origin)
);
