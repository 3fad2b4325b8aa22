-- The transition sundial.run.cancel in SQL, shared by every statement that cancels runs
-- (the API's cancel_run and cancel_runs_of_job, the scheduler's cancel_other_runs):
-- PENDING, QUEUED and RETRYING runs end CANCELLED; a RUNNING one is asked to stop
-- (cancel_requested; its executor learns it through its heartbeat) and keeps its lease
-- check. Spliced as `UPDATE job_runs AS r SET {cancel_set} FROM (SELECT <now> AS at,
-- <reason> AS reason) AS c WHERE ...`: the statement names the instant and the reason,
-- so the SET list is written once (tests/integration/api/test_cancel.py).

-- fragment: cancel_set
status = CASE WHEN r.status = 'running' THEN r.status ELSE 'cancelled' END,
       cancel_requested = r.status = 'running',
       finished_at = CASE WHEN r.status = 'running' THEN r.finished_at ELSE c.at END,
       check_at = CASE WHEN r.status = 'running' THEN r.check_at END,
       next_attempt_at = CASE WHEN r.status = 'running' THEN r.next_attempt_at END,
       error_class = CASE WHEN r.status = 'running' THEN r.error_class ELSE 'cancelled' END,
       skip_reason = CASE WHEN r.status = 'running' THEN r.skip_reason END,
       last_error = c.reason,
       updated_at = c.at
