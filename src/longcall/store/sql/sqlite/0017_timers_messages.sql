-- longcall schema 17: durable timers, messages to runs and values published by runs.
-- A run asleep in ``ctx.sleep`` (or waiting in ``ctx.recv``) is queued with its
-- available_at at the wake-up time, so the claim's index skips it until then; wake_at (and
-- recv_topic, the topic a waiting recv wants) say why: it shows as 'sleeping', not as queued
-- work. A claim clears both. message_seq numbers the run's messages; a send updates it, which
-- also orders sends to one run.
ALTER TABLE lc_runs ADD COLUMN wake_at REAL;
ALTER TABLE lc_runs ADD COLUMN recv_topic TEXT;
ALTER TABLE lc_runs ADD COLUMN message_seq INTEGER NOT NULL DEFAULT 0;

-- Messages sent to a run (app.send), kept until a recv of their topic takes them, in order.
CREATE TABLE lc_run_messages (
    run_id          TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    topic           TEXT NOT NULL,
    message         TEXT NOT NULL,
    idempotency_key TEXT,
    received_at     REAL,
    created_at      REAL NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, idempotency_key)
);
CREATE INDEX lc_run_messages_unread ON lc_run_messages (run_id, topic, seq)
    WHERE received_at IS NULL;

-- Values a run published (ctx.set_event), the latest by key, for app.get_event.
CREATE TABLE lc_run_values (
    run_id      TEXT NOT NULL REFERENCES lc_runs (run_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (run_id, key)
);
