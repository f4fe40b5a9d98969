-- longcall schema 17: durable timers. A run asleep in ``ctx.sleep`` is queued with its
-- available_at at the wake-up time (so the claim's index skips it until then), and wake_at
-- says why: it shows as 'sleeping', not as queued work. A claim clears it.
ALTER TABLE lc_runs ADD COLUMN wake_at REAL;
