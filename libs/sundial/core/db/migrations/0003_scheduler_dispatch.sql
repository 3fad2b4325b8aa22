-- Scheduler dispatch support (issue 5).

-- RunDispatch.dispatch_seq: one value per publish decision (a dispatch batch or a
-- republish), unique and increasing cluster-wide. Part of the JetStream message id
-- (<run_key>#<dispatch_seq>), so a retried publish dedups and a republish does not.
-- CACHE 1 keeps values increasing across sessions (a per-session cache would not).
CREATE SEQUENCE sundial_dispatch_seq AS bigint START 1 CACHE 1;

-- Buffered runs (overlap BUFFER_ONE/ALL) waiting for the run blocking them. The release
-- sweep looks for the oldest pending run of each job with no live run; pending rows are
-- few, so this index stays small. The check_at index does not cover `pending` runs.
CREATE INDEX job_runs_pending_idx ON job_runs (partition_id, job_id, scheduled_at)
    WHERE status = 'pending';
