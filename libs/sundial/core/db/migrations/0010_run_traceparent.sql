-- Each run's W3C trace context (docs/design.md section 9, "Traces").
--
-- One trace per run: the context is born with the run (the dispatcher's span, the
-- TriggerJob call's, a backfill's) and every later step joins it: the sweeper's
-- publishes and retries, every attempt (the ledger hands it out with each grant), the
-- dead letter. Stored with the row, so a retry republished minutes later by another
-- scheduler, or leased by another executor, stays in the same trace. NULL for runs
-- created while tracing was off. A nullable column without a default changes the
-- catalog only: no existing row is rewritten.
ALTER TABLE job_runs ADD COLUMN traceparent text;
