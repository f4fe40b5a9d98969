-- longcall schema 15 (SQLite): the W3C trace context (traceparent, tracestate, as a JSON
-- object) of the span a job was created in, so that the spans of its completion and its
-- delivery, days later and in another process, link to the span of the call that started it.
ALTER TABLE lc_jobs ADD COLUMN trace_context TEXT;
