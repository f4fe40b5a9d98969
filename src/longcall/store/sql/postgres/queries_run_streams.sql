-- Durable streams a run writes (ctx.stream, ctx.close_stream) and clients read (read_stream).
-- Every name here exists in sqlite/queries_run_streams.sql too.

-- name: insert_stream_item
-- Appends at the stream's next seq while the run is still ``holder``'s and the stream is
-- not closed; an origin already there (a replayed write) inserts nothing. No row back: the
-- write was not made (see stream_write_refusal).
INSERT INTO lc_run_streams (run_id, key, seq, origin, value, created_at)
SELECT %(run_id)s, %(key)s,
       COALESCE((SELECT MAX(seq) FROM lc_run_streams WHERE run_id = %(run_id)s AND key = %(key)s), 0) + 1,
       %(origin)s, %(value)s::jsonb, lc_now(%(now)s)
WHERE EXISTS (SELECT 1 FROM lc_runs
              WHERE run_id = %(run_id)s AND holder = %(holder)s AND status = 'running')
  AND NOT EXISTS (SELECT 1 FROM lc_run_streams
                  WHERE run_id = %(run_id)s AND key = %(key)s AND origin = 'end')
ON CONFLICT (run_id, key, origin) DO NOTHING
RETURNING seq;

-- name: stream_write_refusal
-- Why insert_stream_item wrote nothing: the origin is there (a replay), the stream is closed,
-- or the run is no longer held.
SELECT EXISTS (SELECT 1 FROM lc_run_streams
               WHERE run_id = %(run_id)s AND key = %(key)s AND origin = %(origin)s) AS replayed,
       EXISTS (SELECT 1 FROM lc_run_streams
               WHERE run_id = %(run_id)s AND key = %(key)s AND origin = 'end') AS closed;

-- name: stream_run_status
SELECT status FROM lc_runs WHERE run_id = %(run_id)s;

-- name: stream_items
-- Its LIMIT is written in (queries.LIMIT_MARK): one plan kept, a walk of the primary key.
SELECT seq, origin, value FROM lc_run_streams
WHERE run_id = %(run_id)s AND key = %(key)s AND seq > %(after)s
ORDER BY seq LIMIT {limit};
