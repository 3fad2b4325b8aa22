-- Scheduler review fixes: the dead-letter outbox and the quarantine of unplannable jobs.

-- A run that dies keeps check_at set until JetStream acknowledged its DeadLetter; the
-- sweeper publishes the due ones (message id <run_key>#dead#<attempt>, deduplicated by
-- JetStream) and clears check_at. Dead rows are outside job_runs_check_idx (it covers
-- queued/running/retrying), so they get their own small index: only rows whose letter is
-- not yet confirmed are in it.
CREATE INDEX job_runs_dead_letter_idx ON job_runs (partition_id, check_at)
    WHERE status = 'dead' AND check_at IS NOT NULL;

-- A job whose stored definition cannot be planned is not claimed again before this
-- instant. next_run_at stays the nominal occurrence (it is part of the run key), so a
-- quarantine never invents an off-schedule run. NULL for every healthy job; the
-- dispatcher clears it once the job plans again.
ALTER TABLE jobs ADD COLUMN dispatch_not_before timestamptz;

-- Retention drops a day's partition only once none of its runs is live: a run still
-- pending, queued, running or retrying (a long backoff, a buffered run behind a stuck
-- one, a replayed old run), or dead with its dead letter not yet acknowledged, keeps its
-- day until it ends; a later maintenance pass drops it then. Same contract otherwise as
-- in 0001. The job_runs lock is taken before the check (DROP TABLE would take it anyway),
-- so no run of the day can come alive between the check and the drop.
CREATE OR REPLACE FUNCTION sundial_drop_run_partitions_before(p_cutoff date)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET lock_timeout = '5s'
AS $fn$
DECLARE
    v_name text;
    v_live boolean;
BEGIN
    IF p_cutoff IS NULL THEN
        RAISE EXCEPTION 'cutoff must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM pg_advisory_xact_lock(6004186327350937411);
    FOR v_name IN
        SELECT c.relname::text
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'job_runs'::regclass
           -- CASE, not AND: SQL may evaluate AND operands in any order, and to_date
           -- would fail on 'default'.
           AND CASE WHEN c.relname ~ '^job_runs_[0-9]{8}$'
                    THEN to_date(substr(c.relname, 10), 'YYYYMMDD') < p_cutoff
                    ELSE false END
         ORDER BY c.relname
    LOOP
        LOCK TABLE job_runs IN ACCESS EXCLUSIVE MODE;
        -- Each branch is served by a partial index (unfinished runs, dead-letter outbox).
        EXECUTE format(
            'SELECT EXISTS (SELECT 1 FROM %1$I WHERE status IN (''pending'', ''queued'','
            ' ''running'', ''retrying''))'
            ' OR EXISTS (SELECT 1 FROM %1$I WHERE status = ''dead'' AND check_at IS NOT NULL)',
            v_name)
          INTO v_live;
        CONTINUE WHEN v_live;
        EXECUTE format('DROP TABLE %I', v_name);
        RETURN NEXT v_name;
    END LOOP;
END
$fn$;
