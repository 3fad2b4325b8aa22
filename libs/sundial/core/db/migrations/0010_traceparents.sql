-- W3C trace contexts (docs/design.md section 9, "Traces").
--
-- One trace per run: the context is born with the run (the dispatcher's span, the
-- TriggerJob call's, a backfill's) and every later step joins it: the sweeper's
-- publishes and retries, every attempt (the ledger hands it out with each grant), the
-- dead letter. Stored with the row, so a retry republished minutes later by another
-- scheduler, or leased by another executor, stays in the same trace. NULL for runs
-- created while tracing was off.
ALTER TABLE job_runs ADD COLUMN traceparent text;

-- The CreateJob (or BatchCreateJobs) call that made the job, until its first dispatch:
-- the runs of that dispatch link to it, then the dispatch clears it (the jobs row is the
-- hot row; the context rides on it only until then). NULL while tracing is off.
ALTER TABLE jobs ADD COLUMN create_traceparent text;

-- Nullable columns without a default change the catalog only: no row is rewritten.
