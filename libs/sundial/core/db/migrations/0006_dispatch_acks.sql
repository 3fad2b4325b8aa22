-- Confirming a publish writes one row per RunDispatch message instead of one per run.
--
-- A dispatched run keeps check_at = its publish-confirm deadline. Once JetStream
-- acknowledged the message, the scheduler records (dispatch_seq, recheck_at) here; the
-- sweeper, when a run's check_at passes while it is still queued under that dispatch,
-- finds the ack and moves check_at to recheck_at (the lost-message check) instead of
-- publishing again. Runs leased in time (nearly all) never meet the sweeper, so a batch
-- of 500 costs one write here where it cost 500 run-row updates. Rows are small and
-- short-lived: maintenance deletes those whose recheck passed long ago, and a lost
-- stream's republish deletes those of the runs it makes due again.
CREATE TABLE dispatch_acks (
    dispatch_seq bigint PRIMARY KEY,
    recheck_at timestamptz NOT NULL
);

-- The sweeper deletes acks whose recheck passed, a bounded batch per pass.
CREATE INDEX dispatch_acks_recheck_idx ON dispatch_acks (recheck_at);
