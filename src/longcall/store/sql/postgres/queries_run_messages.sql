-- Messages to runs (app.send, ctx.recv) and values published by runs (ctx.set_event).
-- Every name here exists in sqlite/queries_run_messages.sql too.

-- name: message_by_key
SELECT seq, topic FROM lc_run_messages WHERE run_id = %(run_id)s AND idempotency_key = %(key)s;

-- name: number_message
-- Takes the run's next message number, and wakes the run if it waits in a recv of this topic.
-- Updating the row also orders this send with the run's own end: a recv suspending at the
-- same moment either sees this message or is woken by it (see wake_for_message).
UPDATE lc_runs SET message_seq = message_seq + 1,
    available_at = CASE WHEN status = 'queued' AND recv_topic = %(topic)s THEN lc_now(%(now)s)
                        ELSE available_at END
WHERE run_id = %(run_id)s AND status IN ('queued', 'running', 'waiting_input')
RETURNING message_seq, status, recv_topic;

-- name: insert_message
INSERT INTO lc_run_messages (run_id, seq, topic, message, idempotency_key, created_at)
VALUES (%(run_id)s, %(seq)s, %(topic)s, %(message)s::jsonb, %(key)s, lc_now(%(now)s))
ON CONFLICT DO NOTHING
RETURNING seq;

-- name: next_message
SELECT seq, message FROM lc_run_messages
WHERE run_id = %(run_id)s AND topic = %(topic)s AND received_at IS NULL
ORDER BY seq LIMIT 1;

-- name: mark_received
UPDATE lc_run_messages SET received_at = lc_now(%(now)s) WHERE run_id = %(run_id)s AND seq = %(seq)s;

-- name: wake_for_message
-- After a run suspended in a recv: a message of its topic sent meanwhile wakes it now.
UPDATE lc_runs SET available_at = lc_now(%(now)s)
WHERE run_id = %(run_id)s AND status = 'queued' AND recv_topic = %(topic)s
  AND EXISTS (SELECT 1 FROM lc_run_messages m
              WHERE m.run_id = %(run_id)s AND m.topic = %(topic)s AND m.received_at IS NULL)
RETURNING run_id;

-- name: set_run_value
INSERT INTO lc_run_values (run_id, key, value, updated_at)
VALUES (%(run_id)s, %(key)s, %(value)s::jsonb, lc_now(%(now)s))
ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;

-- name: run_value
SELECT value FROM lc_run_values WHERE run_id = %(run_id)s AND key = %(key)s;
