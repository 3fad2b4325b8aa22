-- Named queries of the scheduler service (docs/design.md sections 5-7). Only the store package runs them.
--
-- Conventions: "now" is always a parameter (the caller's clock) so tests control time;
-- batches travel as parallel arrays through unnest(), never one statement per row.
-- Lock order everywhere: jobs, then job_runs (sorted by primary key), then job_stats.
-- A statement that finds runs by their keys (unnest of job ids and instants) states the
-- run's required state inside a CASE, never as a plain status predicate: a plain
-- `r.status = 'running'` lets the planner answer it from a status-keyed or partial index
-- instead of the primary key, and those indexes' statistics describe the moment of the
-- last ANALYZE (a daily partition analyzed before a herd believes it holds no queued or
-- running run). With them, one admission of 128 runs scanned a whole partial index per
-- key: 0.12-0.52 s a call (docs/design.md section 8, "Plans that stay index probes").
-- The locks of LeaseRuns and CompleteRuns (runs_locked_by_key) probe each key in a
-- LATERAL subquery (the keys sorted first: rows are locked in key order): a join of the
-- keys with job_runs is the planner's to cost, and it costs a probe once per run
-- partition, so a hash join over a seq scan of a young day's partition looked cheaper (a
-- LeaseRuns of 128 runs scanned the 8,000-20,000 runs of a herd's day: 7-9 ms against
-- 1.6 ms). record_successes keeps its join: it locks and updates in one statement, and
-- a LATERAL lock there made the update's own join a scan (docs/design.md section 8).

-- fragment: runs_locked_by_key
-- The runs of the keys $1/$2 (job ids, instants) as "r", each key probed and its row
-- locked, in key order (the conventions above); a key without a row is absent.
  FROM (SELECT DISTINCT job_id, scheduled_at
          FROM unnest($1::uuid[], $2::timestamptz[]) AS x(job_id, scheduled_at)
         ORDER BY 1, 2) AS q
 CROSS JOIN LATERAL (
        SELECT * FROM job_runs r
         WHERE r.job_id = q.job_id AND r.scheduled_at = q.scheduled_at
           FOR UPDATE) AS r

-- fragment: fixed_delay
-- The delay of a fixed-delay job (IntervalSchedule.from_end) as its JSON duration text,
-- NULL for every other job; the query names job_definitions "d". The ledger and the
-- sweeper re-arm such a job when its run ends (rearm_fixed_delays).
CASE WHEN d.schedule -> 'interval' ->> 'from_end' = 'true'
     THEN d.schedule -> 'interval' ->> 'every' END AS fixed_delay

-- name: claim_due_jobs
-- Locks up to $2 due jobs of the owned partitions $1 (due: nominal next_run_at in
-- ($5, $6], $6 <= now $3, and not quarantined at $3), at most $4 per partition,
-- partitions in the order given. One index probe per partition in jobs_due_idx order: a
-- batch reads only the rows it locks (plus those others hold), never every due row of
-- every partition (a global ORDER BY over partition_id = ANY(...) would read and sort all
-- of them for each batch of a herd). The range lets a dispatcher behind a backlog take
-- what fell due since before the backlog (docs/design.md section 7, "Flow control").
-- Jobs of the tenants $7 are left out (empty: none): the other tenants' part of a
-- backlog, claimed before the rest; the probe then reads the left-out tenants' due rows
-- too (a heap visit each, once per backlog: the backlog's own dispatch writes each of
-- them). Rows another scheduler holds are skipped, not waited for. Definitions are read
-- after the lock, in another statement (job_definitions_of).
SELECT j.job_id, j.tenant_id, j.partition_id, j.next_run_at, j.fired_count, j.version,
       j.definition_digest, j.create_traceparent, j.last_fire_at
  FROM unnest($1::smallint[]) AS p(id)
 CROSS JOIN LATERAL (
        SELECT job_id, tenant_id, partition_id, next_run_at, fired_count, version,
               definition_digest, create_traceparent, last_fire_at
          FROM jobs
         WHERE partition_id = p.id
           AND NOT paused
           AND next_run_at > $5::timestamptz
           AND next_run_at <= $6::timestamptz
           AND (dispatch_not_before IS NULL OR dispatch_not_before <= $3::timestamptz)
           AND tenant_id <> ALL($7::text[])
         ORDER BY next_run_at
         LIMIT $4
           FOR UPDATE SKIP LOCKED) AS j
 LIMIT $2;

-- name: next_due_at
-- When the next unpaused job of the owned partitions $1 due after $2 comes due (a
-- quarantined one at its dispatch_not_before): one probe of jobs_due_idx per partition,
-- so the dispatcher can sleep until then instead of polling. NULL: nothing scheduled.
SELECT min(greatest(j.next_run_at, coalesce(j.dispatch_not_before, j.next_run_at))) AS due
  FROM unnest($1::smallint[]) AS p(id)
 CROSS JOIN LATERAL (
        SELECT next_run_at, dispatch_not_before
          FROM jobs
         WHERE partition_id = p.id AND NOT paused AND next_run_at > $2::timestamptz
         ORDER BY next_run_at
         LIMIT 1) AS j;

-- name: waiting_runs
-- How many runs of tenants $1 wait for admission, counted up to $2 (an index-only range
-- of run_waits_order_idx per tenant, stopped at the limit): how far the waiting list is
-- ahead of the admissions when the dispatcher feeds a backlog into it.
SELECT count(*)::int
  FROM (SELECT 1 FROM run_waits WHERE tenant_id = ANY($1::text[]) LIMIT $2) AS w;

-- name: job_definitions_of
-- The definitions of jobs $1 this transaction has locked (those whose digest the
-- dispatcher has not cached: one job per digest), as JSON text grouped by document, with
-- the document's digest computed as migration 0008 does. Read in a statement of its own
-- after the lock: READ COMMITTED gives it a fresh snapshot, so a definition changed by an
-- UpdateJob that committed while the claim waited is seen with the jobs row (and digest)
-- it belongs to; the locks keep it from changing until the commit.
-- The schedule comes with the contents of the calendars it references (migration 0015).
SELECT sundial_definition_digest(schedule, policies, calendars) AS digest,
       sundial_dispatch_schedule(schedule, calendars)::text AS schedule,
       policies::text AS policies, array_agg(job_id) AS job_ids
  FROM job_definitions
 WHERE job_id = ANY($1::uuid[])
 GROUP BY 1, 2, 3;

-- name: live_run_counts
-- Unfinished and buffered runs of the jobs $1 (their overlap policies need them): one
-- statement per batch, one probe of job_runs_unfinished_idx per job and run partition,
-- planned once per connection (migration 0029).
SELECT job_id, unfinished, buffered FROM sundial_live_run_counts($1::uuid[]);

-- name: last_scheduled_runs
-- Fixed delay (docs/design.md section 4): the status and end of each claimed job's last
-- scheduled occurrence ($1/$2: job and last_fire_at), one primary-key probe each; asked
-- only for the fixed-delay jobs of a batch. A key without a row is absent.
SELECT r.job_id, r.status, r.finished_at
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(job_id, scheduled_at)
  JOIN job_runs r ON r.job_id = k.job_id AND r.scheduled_at = k.scheduled_at;

-- name: rearm_fixed_delays
-- Fixed delay (docs/design.md section 4): the scheduled runs $1/$2 of fixed-delay jobs
-- ended in this transaction; each job whose last fire is still that run is due at $3 (the
-- run's end plus the delay), or later if it already was (a resume's delay). Runs are
-- locked already and the lock order is jobs first, so the jobs rows are taken SKIP
-- LOCKED: a row another transaction holds keeps its re-check time, and the dispatcher's
-- claim then derives the same instant from the run row. A schedule that ended (NULL)
-- stays ended.
WITH due AS (
    SELECT u.job_id, u.next_run_at
      FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[])
           AS u(job_id, scheduled_at, next_run_at)
      JOIN jobs j ON j.job_id = u.job_id
     WHERE j.last_fire_at = u.scheduled_at AND j.next_run_at IS NOT NULL
     ORDER BY u.job_id
       FOR NO KEY UPDATE OF j SKIP LOCKED
)
UPDATE jobs j
   SET next_run_at = greatest(j.next_run_at, due.next_run_at)
  FROM due
 WHERE j.job_id = due.job_id
RETURNING j.job_id;

-- name: quarantine_jobs
-- Jobs $1 whose definition could not be planned wait until $2; next_run_at is untouched.
UPDATE jobs SET dispatch_not_before = $2 WHERE job_id = ANY($1::uuid[]);

-- name: next_dispatch_seqs
-- $1 fresh values of the dispatch sequence, one per publish decision.
SELECT nextval('sundial_dispatch_seq') AS seq FROM generate_series(1, $1::int);

-- name: cancel_other_runs
-- OVERLAP_POLICY_CANCEL_OTHER for jobs $1 at $2, the transition sundial.run.cancel (the
-- shared SET list of sundial/run/cancel.sql): running runs not asked yet are asked to stop
-- (through their executors' heartbeats; the ledger counts them when they end); runs not
-- yet started are cancelled at once and counted in the job's stats here.
WITH cancelled AS (
    UPDATE job_runs AS r
       SET {cancel_set}
      FROM (SELECT $2::timestamptz AS at,
                   'cancelled by overlap policy CANCEL_OTHER'::text AS reason) AS c
     WHERE r.job_id = ANY($1::uuid[])
       AND r.status IN ('pending', 'queued', 'running', 'retrying')
       AND NOT (r.status = 'running' AND r.cancel_requested)
    RETURNING r.job_id, r.status
), running AS (
    SELECT 1 FROM cancelled WHERE status = 'running'
), waiting AS (
    SELECT job_id FROM cancelled WHERE status = 'cancelled'
), counted AS (
    INSERT INTO job_stats AS s (job_id, cancelled_count, updated_at)
    SELECT job_id, count(*), $2 FROM waiting GROUP BY job_id ORDER BY job_id
    ON CONFLICT (job_id) DO UPDATE
       SET cancelled_count = s.cancelled_count + EXCLUDED.cancelled_count,
           updated_at = EXCLUDED.updated_at
)
SELECT (SELECT count(*) FROM running) AS asked, (SELECT count(*) FROM waiting) AS cancelled;

-- name: insert_runs
-- Inserts the planned run rows; a run key that already exists is left alone (the
-- primary key is what makes dispatch once per run key). The command tag counts the rows
-- inserted (runs_of_dispatches tells which, when not all were). $11: each run's trace
-- context, or NULL while tracing is off (unnest pads a NULL array with NULLs).
INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                      dispatch_seq, check_at, lateness_ms, skip_reason, finished_at,
                      created_at, updated_at, traceparent)
SELECT r.job_id, r.scheduled_at, r.tenant_id, r.partition_id, 'scheduled', r.status,
       r.dispatch_seq, r.check_at, r.lateness_ms, r.skip_reason,
       CASE WHEN r.status = 'skipped' THEN $10::timestamptz END, $10, $10, r.traceparent
  FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::smallint[], $5::text[],
              $6::bigint[], $7::timestamptz[], $8::bigint[], $9::text[], $11::text[])
       AS r(job_id, scheduled_at, tenant_id, partition_id, status, dispatch_seq, check_at,
            lateness_ms, skip_reason, traceparent)
ON CONFLICT (job_id, scheduled_at) DO NOTHING;

-- name: runs_of_dispatches
-- Of the run keys $1/$2, those written under the dispatch sequences $3 (all fresh, so
-- exactly the rows this transaction inserted): asked only when insert_runs inserted
-- fewer rows than it was given.
SELECT r.job_id, r.scheduled_at, r.dispatch_seq
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(job_id, scheduled_at)
  JOIN job_runs r ON r.job_id = k.job_id AND r.scheduled_at = k.scheduled_at
 WHERE r.dispatch_seq = ANY($3::bigint[]);

-- name: advance_jobs
-- Moves each claimed job to its next nominal fire time (NULL: schedule exhausted), counts
-- the occurrences it consumed (for max_runs) and records its last fire and lateness (a
-- job that fired nothing keeps them); the creating call's context served its first runs.
-- One round trip; arrays in job_id order. Each row is found by a primary-key probe and
-- written by its row address (the rows are locked by claim_due_jobs in this transaction,
-- so the address holds): a join was planned as a hash join over a seq scan of every job
-- for each batch (500 of 20,000 jobs: 10 ms against 4).
UPDATE jobs j
   SET next_run_at = u.next_run_at, fired_count = j.fired_count + u.fired,
       dispatch_not_before = NULL, create_traceparent = NULL,
       last_fire_at = coalesce(u.last_fire_at, j.last_fire_at),
       last_lateness_ms = coalesce(u.lateness_ms, j.last_lateness_ms)
  FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::timestamptz[], $5::bigint[])
       AS u(job_id, next_run_at, fired, last_fire_at, lateness_ms)
       CROSS JOIN LATERAL (SELECT k.ctid AS job_row FROM jobs k
                            WHERE k.job_id = u.job_id OFFSET 0) AS x
 WHERE j.ctid = x.job_row;

-- name: count_dispatch_drops
-- Misfired occurrences dropped ($2) and overlapping ones skipped ($3) by the dispatch of
-- jobs $1 (only jobs with any: most dispatches have none), in job_id order so
-- concurrent stats upserts lock rows in the same order.
INSERT INTO job_stats AS s (job_id, missed_count, skipped_count, updated_at)
SELECT u.job_id, u.missed, u.skipped, $4
  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS u(job_id, missed, skipped)
 ORDER BY u.job_id
ON CONFLICT (job_id) DO UPDATE
   SET missed_count = s.missed_count + EXCLUDED.missed_count,
       skipped_count = s.skipped_count + EXCLUDED.skipped_count,
       updated_at = EXCLUDED.updated_at;

-- name: record_misfires
-- The misfired occurrences the dispatch of jobs $1 skipped: per job the nominal times of
-- the first ($2) and last ($3) skipped, how many ($4) and whether exactly ($5), at $6
-- (migration 0016; read by the API's SLO). Fire times of a job only increase, so a
-- first_at is never skipped twice.
INSERT INTO job_misfires (job_id, first_at, last_at, skipped, exact, recorded_at)
SELECT u.job_id, u.first_at, u.last_at, u.skipped, u.exact, $6
  FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::bigint[],
              $5::boolean[]) AS u(job_id, first_at, last_at, skipped, exact)
ON CONFLICT (job_id, first_at) DO NOTHING;

-- name: purge_misfires
-- Misfire records made before $1 (the run retention's horizon), up to $2 of them; the
-- count deleted.
WITH gone AS (
    DELETE FROM job_misfires
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM job_misfires WHERE recorded_at < $1 LIMIT $2))
    RETURNING 1
)
SELECT count(*) FROM gone;

-- name: confirm_published
-- JetStream acknowledged the dispatches $1: their runs, while still unleased, are looked
-- at again only at $2 (a lost message). One row per dispatch, not per run (0006).
INSERT INTO dispatch_acks (dispatch_seq, recheck_at)
SELECT unnest($1::bigint[]), $2
ON CONFLICT (dispatch_seq) DO NOTHING;

-- name: purge_dispatch_acks
-- Up to $2 acks whose recheck passed at $1: a run still queued under one is published
-- again on its check anyway, so the ack says nothing any more.
DELETE FROM dispatch_acks
 WHERE dispatch_seq IN (SELECT dispatch_seq FROM dispatch_acks WHERE recheck_at < $1
                         ORDER BY recheck_at LIMIT $2);

-- name: defer_checks
-- Runs $1/$2 (locked by this transaction) whose publish was acknowledged: look at them
-- again at $3[i] (the lost-message recheck), nothing else changes.
UPDATE job_runs r
   SET check_at = u.check_at
  FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[])
       AS u(job_id, scheduled_at, check_at)
 WHERE r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at;

-- name: republish_queued
-- SUNDIAL_RUNS was lost and is back empty: every published run of owned partitions $1
-- still waiting unleased may have gone with it, so it is due for the sweeper's republish
-- now ($2) instead of unleased_republish_s after its publish. A jittered run not
-- published yet (dispatch_seq 0) keeps its due time.
WITH due AS (
    UPDATE job_runs
       SET check_at = $2
     WHERE partition_id = ANY($1::smallint[]) AND status = 'queued'
       AND dispatch_seq > 0 AND check_at > $2
    RETURNING dispatch_seq
), unacked AS (
    -- Their messages are gone: the sweeper must publish them, not trust the ack.
    DELETE FROM dispatch_acks WHERE dispatch_seq IN (SELECT dispatch_seq FROM due)
)
SELECT count(*) FROM due;

-- name: lock_due_checks
-- Runs of owned partitions $1 whose check_at passed ($3): unconfirmed or unleased
-- publishes (acked_until: when an acknowledged one is due for the lost-message check),
-- deferred (jittered) or released runs, expired leases, due retries. With
-- each, its job's policies as text: the retry budget an expired lease is charged against
-- is decided in Python (sundial.run.lease_expiry), not read out of the JSON here, and so
-- are a due retry's priority and rate-limit key, for its admission (hold_retries).
SELECT r.job_id, r.scheduled_at, r.partition_id, r.tenant_id, r.status, r.cancel_requested,
       r.attempt, r.attempt_base, r.check_at, d.policies::text AS policies,
       a.recheck_at AS acked_until, r.traceparent, {fixed_delay}
  FROM job_runs r
  LEFT JOIN job_definitions d ON d.job_id = r.job_id
  LEFT JOIN dispatch_acks a ON a.dispatch_seq = r.dispatch_seq AND r.status = 'queued'
 WHERE r.partition_id = ANY($1::smallint[])
   AND r.status IN ('queued', 'running', 'retrying')
   AND r.check_at <= $3
 ORDER BY r.check_at
 LIMIT $2
   FOR UPDATE OF r SKIP LOCKED;

-- name: apply_checks
-- Writes the sweep's decisions for the rows lock_due_checks returned.
UPDATE job_runs r
   SET status = u.status,
       dispatch_seq = u.dispatch_seq,
       check_at = u.check_at,
       finished_at = u.finished_at,
       lease_until = CASE WHEN r.status = 'running' THEN NULL ELSE r.lease_until END,
       last_error = coalesce(u.last_error, r.last_error),
       error_class = coalesce(u.error_class, r.error_class),
       next_attempt_at = NULL,
       -- A scheduled run's first publish (a jittered run's deferred one): its lateness
       -- is measured now, against the due time check_at held until then.
       lateness_ms = CASE
           WHEN r.kind = 'scheduled' AND r.status = 'queued' AND r.dispatch_seq = 0
                AND u.status = 'queued' AND r.check_at IS NOT NULL
           THEN coalesce(r.lateness_ms,
                         greatest(0, (extract(epoch FROM $9 - r.check_at) * 1000)::bigint))
           ELSE r.lateness_ms END,
       updated_at = $9
  FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::bigint[], $5::timestamptz[],
              $6::timestamptz[], $7::text[], $8::text[])
       AS u(job_id, scheduled_at, status, dispatch_seq, check_at, finished_at, error_class,
            last_error)
 WHERE r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at
RETURNING r.job_id, r.scheduled_at, r.partition_id, r.status, r.dispatch_seq;

-- name: release_pending
-- Buffered runs whose blocker ended: the oldest pending run of each job of partitions
-- $1 that has no queued, running or retrying run becomes queued, due for publish now.
WITH candidates AS (
    SELECT DISTINCT ON (p.job_id) p.job_id, p.scheduled_at
      FROM job_runs p
     WHERE p.partition_id = ANY($1::smallint[]) AND p.status = 'pending'
       AND NOT EXISTS (
             SELECT 1 FROM job_runs a
              WHERE a.job_id = p.job_id AND a.status IN ('queued', 'running', 'retrying'))
     ORDER BY p.job_id, p.scheduled_at
     LIMIT $2
)
UPDATE job_runs r
   SET status = 'queued', check_at = $3, dispatch_seq = 0, updated_at = $3
  FROM candidates c
 WHERE r.job_id = c.job_id AND r.scheduled_at = c.scheduled_at AND r.status = 'pending'
RETURNING r.job_id, r.scheduled_at;

-- name: release_pending_of_jobs
-- As release_pending, for the jobs $1 whose run just ended (the ledger's fast path).
WITH candidates AS (
    SELECT DISTINCT ON (p.job_id) p.job_id, p.scheduled_at
      FROM job_runs p
     WHERE p.job_id = ANY($1::uuid[]) AND p.status = 'pending'
       AND NOT EXISTS (
             SELECT 1 FROM job_runs a
              WHERE a.job_id = p.job_id AND a.status IN ('queued', 'running', 'retrying'))
     ORDER BY p.job_id, p.scheduled_at
)
UPDATE job_runs r
   SET status = 'queued', check_at = $2, dispatch_seq = 0, updated_at = $2
  FROM candidates c
 WHERE r.job_id = c.job_id AND r.scheduled_at = c.scheduled_at AND r.status = 'pending'
RETURNING r.job_id, r.scheduled_at;

-- name: claim_dead_letters
-- The outbox of dead letters: dead runs of partitions $1 whose DeadLetter JetStream has
-- not acknowledged and is due ($3), at most $2, with what the letter carries. Their
-- check_at moves to $4 so a concurrent sweep leaves them alone while this one publishes;
-- if the publish fails they are due again then.
WITH due AS (
    SELECT job_id, scheduled_at
      FROM job_runs
     WHERE partition_id = ANY($1::smallint[])
       AND status = 'dead' AND check_at IS NOT NULL AND check_at <= $3
     ORDER BY check_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE job_runs r
       SET check_at = $4
      FROM due
     WHERE r.job_id = due.job_id AND r.scheduled_at = due.scheduled_at
    RETURNING r.job_id, r.scheduled_at, r.tenant_id, r.kind, r.attempt, r.executor_id,
              r.started_at, r.finished_at, r.last_error, r.error_class, r.traceparent
)
SELECT c.*, j.name AS job_name, d.target, d.payload, d.labels
  FROM claimed c
  LEFT JOIN jobs j ON j.job_id = c.job_id
  LEFT JOIN job_definitions d ON d.job_id = c.job_id;

-- name: clear_dead_letters
-- JetStream acknowledged the DeadLetter of these runs (at attempt $3): the outbox entry
-- is done. A run replayed and dead again since (a newer attempt) keeps its own entry.
UPDATE job_runs r
   SET check_at = NULL
  FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS a(job_id, scheduled_at, attempt)
 WHERE r.job_id = a.job_id AND r.scheduled_at = a.scheduled_at AND r.attempt = a.attempt
   AND CASE WHEN r.status = 'dead' THEN true ELSE false END;  -- by key (conventions)

-- name: durable_commit
-- Run first in a transaction that hands out or ends an attempt (LeaseRuns, CompleteRuns):
-- its COMMIT returns only once the commit record is flushed (and, where
-- synchronous_standby_names names standbys, flushed there too), whatever the server's
-- default; remote_apply, stronger still, is kept. For this transaction only (is_local).
-- docs/design.md section 10, "Commits that hand out attempts".
SELECT set_config(
         'synchronous_commit',
         CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply'
                                                    ELSE 'on' END,
         true);

-- name: lock_tenants
-- Serialises LeaseRuns per tenant $1 (sorted: no deadlock), so the concurrent-run cap holds
-- even when several executors lease the same tenant's runs at once. Taken after the run
-- rows are locked (lock_runs), so the section a tenant's calls wait for is only the count,
-- the grant and the commit: concurrent calls lock and read their runs in parallel. No
-- deadlock: a call holding a tenant lock waits for no row lock after it.
SELECT pg_advisory_xact_lock(hashtextextended('sundial.tenant:' || t.tenant_id, 0))
  FROM (SELECT DISTINCT tenant_id FROM unnest($1::text[]) AS u(tenant_id) ORDER BY 1) AS t;

-- name: tenant_lease_terms
-- Per tenant of a LeaseRuns call (locked by lock_tenants, so the count holds until the
-- commit; a statement of its own, so its snapshot is taken after the lock was granted):
-- its cap, its egress policy, its runs RUNNING now (the cap counts them) and every signing secret
-- still valid, newest first (two while a rotation overlaps). Once per tenant, not per
-- run: a herd of one tenant reads its secrets once per call.
SELECT t.tenant_id, t.max_concurrent_runs, t.signing_secret,
       -- The tenant's own egress policy (NULL: the operator's default), as it is now.
       t.egress_policy::text AS egress_policy,
       sundial_running_runs(t.tenant_id) AS running_runs,  -- planned once (migration 0029)
       (SELECT array_agg(k.secret ORDER BY k.created_at DESC)
          FROM tenant_signing_secrets k
         WHERE k.tenant_id = t.tenant_id
           AND (k.expires_at IS NULL OR k.expires_at > now())) AS signing_secrets
  FROM tenants t
 WHERE t.tenant_id = ANY($1::text[]);

-- name: concurrency_key_terms
-- The concurrency limits (FlowLimit.max_running) of the (tenant $1[i], key $2[i]) pairs
-- of a LeaseRuns call that have one, each with its runs RUNNING now: the tenant's
-- running runs (their range of job_runs_tenant_inflight_idx, at most its cap) whose job
-- names the key.
-- Read under the tenant locks (lock_tenants), so the count holds until the commit.
SELECT f.tenant_id, f.key, f.max_running,
       sundial_key_running_runs(f.tenant_id, f.key) AS running_runs  -- migration 0029
  FROM flow_limits f
  JOIN unnest($1::text[], $2::text[]) AS q(tenant_id, key)
    ON f.tenant_id = q.tenant_id AND f.key = q.key
 WHERE f.max_running > 0;

-- name: lock_runs
-- The requested runs with what a grant needs, locked in key order, one probe per key
-- (the conventions above; the tenant's cap and secrets come once per tenant from
-- tenant_lease_terms). Rows that do not exist are simply absent.
SELECT r.job_id, r.scheduled_at, r.tenant_id, r.kind, r.status, r.attempt, r.attempt_base,
       r.lease_until, r.next_attempt_at, r.executor_id, r.lease_id, r.lease_token_id,
       r.cancel_requested, r.traceparent, r.throttled,
       j.job_id IS NOT NULL AS job_exists, j.name AS job_name,
       d.target::text AS target, d.payload, d.policies::text AS policies,
       d.schedule->>'jitter' AS jitter
{runs_locked_by_key}
  LEFT JOIN jobs j ON j.job_id = r.job_id
  LEFT JOIN job_definitions d ON d.job_id = r.job_id
 ORDER BY r.job_id, r.scheduled_at;

-- name: lock_runs_for_completion
-- CompleteRuns' lock: the requested runs with what fencing and the retry decision need,
-- locked in key order, one probe per key (the conventions above), and nothing else (no
-- secrets, target or payload: the hottest ledger call stays one index probe per run plus
-- its definition's policies; tenant_id is in the run's own row, for the opt-in tenant
-- attribute of the outcome counter).
SELECT r.job_id, r.scheduled_at, r.tenant_id, r.status, r.attempt, r.attempt_base,
       r.cancel_requested, r.executor_id, r.lease_id, d.policies::text AS policies,
       {fixed_delay}
{runs_locked_by_key}
  LEFT JOIN job_definitions d ON d.job_id = r.job_id
 ORDER BY r.job_id, r.scheduled_at;

-- name: dead_letters_of
-- The runs $1/$2 that are dead with their DeadLetter not yet acknowledged, with what the
-- letter carries (as claim_dead_letters returns them). Read after CompleteRuns commits.
SELECT r.job_id, r.scheduled_at, r.tenant_id, r.kind, r.attempt, r.executor_id,
       r.started_at, r.finished_at, r.last_error, r.error_class, r.traceparent,
       j.name AS job_name, d.target, d.payload, d.labels
  FROM job_runs r
  JOIN unnest($1::uuid[], $2::timestamptz[]) AS q(job_id, scheduled_at)
    ON r.job_id = q.job_id AND r.scheduled_at = q.scheduled_at
  LEFT JOIN jobs j ON j.job_id = r.job_id
  LEFT JOIN job_definitions d ON d.job_id = r.job_id
 WHERE CASE WHEN r.status = 'dead' THEN r.check_at IS NOT NULL ELSE false END;  -- by key

-- name: grant_runs
-- Leases the runs to executor $3 (credential $6) until $4: a new attempt (the fencing
-- token) under a new random lease id (only its receiver can heartbeat or complete it).
UPDATE job_runs r
   SET status = 'running', attempt = r.attempt + 1, lease_until = $4, check_at = $4,
       executor_id = $3, lease_id = gen_random_uuid(), lease_token_id = $6::uuid,
       started_at = coalesce(r.started_at, $5), next_attempt_at = NULL, updated_at = $5
  FROM unnest($1::uuid[], $2::timestamptz[]) AS g(job_id, scheduled_at)
 WHERE r.job_id = g.job_id AND r.scheduled_at = g.scheduled_at
RETURNING r.job_id, r.scheduled_at, r.attempt, r.lease_id::text AS lease_id;

-- name: regrant_leases
-- Idempotent re-grant: extends to $5 the live leases executor $4 already holds at
-- attempt $3 (rows locked and decided by LeaseRuns), keeping their lease ids.
UPDATE job_runs r
   SET lease_until = $5, check_at = $5, updated_at = $6
  FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS h(job_id, scheduled_at, attempt)
 WHERE r.job_id = h.job_id AND r.scheduled_at = h.scheduled_at AND r.attempt = h.attempt
   AND CASE WHEN r.status = 'running' THEN true ELSE false END  -- by key (conventions)
   AND r.executor_id = $4
RETURNING r.job_id, r.scheduled_at, r.attempt, coalesce(r.lease_id::text, '') AS lease_id;

-- name: extend_leases
-- Heartbeat: extends to $6 the leases executor $5 holds: same attempt ($3) and same lease
-- id ($4; '' for a row leased before lease ids existed).
UPDATE job_runs r
   SET lease_until = $6, check_at = $6, updated_at = $7
  FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[])
       AS h(job_id, scheduled_at, attempt, lease_id)
 WHERE r.job_id = h.job_id AND r.scheduled_at = h.scheduled_at AND r.attempt = h.attempt
   AND coalesce(r.lease_id::text, '') = h.lease_id
   AND CASE WHEN r.status = 'running' THEN true ELSE false END  -- by key (conventions)
   AND r.executor_id = $5
RETURNING r.job_id, r.scheduled_at, r.attempt, h.lease_id, r.cancel_requested;

-- name: record_outcomes
-- Writes accepted outcomes (the caller checked the fence under the row lock).
UPDATE job_runs r
   SET status = u.status,
       check_at = u.check_at,
       next_attempt_at = u.next_attempt_at,
       finished_at = u.finished_at,
       lease_until = NULL,
       last_error = coalesce(u.last_error, r.last_error),
       error_class = coalesce(u.error_class, r.error_class),
       last_http_status = u.http_status,
       last_grpc_code = u.grpc_code,
       updated_at = $11
  FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[],
              $5::timestamptz[], $6::timestamptz[], $7::text[], $8::text[], $9::int[],
              $10::int[])
       AS u(job_id, scheduled_at, status, check_at, next_attempt_at, finished_at,
            last_error, error_class, http_status, grpc_code)
 WHERE r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at
RETURNING r.job_id;

-- name: record_successes
-- CompleteRuns' fast path: the runs $1/$2 reported SUCCEEDED whose lease executor $5
-- holds (attempt $3, lease id $4; '' for a row leased before lease ids existed) and that
-- are RUNNING, the fence of sundial.run.fence in the statement, end SUCCEEDED at $9, as
-- sundial.run.succeeded writes them (record_outcomes' columns, error text $6, HTTP status
-- $7, gRPC code $8): no read of the run before, no retry decision to make. Rows are
-- locked in key order (held) before the update. A run not returned was fenced: the
-- caller reads it under lock_runs_for_completion to say why. Returns each run's tenant
-- and its job's fixed delay (rearm_fixed_delays).
WITH held AS (
    SELECT r.job_id, r.scheduled_at, u.last_error, u.http_status, u.grpc_code,
           {fixed_delay}
      FROM job_runs r
      JOIN unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[], $6::text[],
                  $7::int[], $8::int[])
           AS u(job_id, scheduled_at, attempt, lease_id, last_error, http_status, grpc_code)
        ON r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at
      LEFT JOIN job_definitions d ON d.job_id = r.job_id
     WHERE r.attempt = u.attempt AND coalesce(r.lease_id::text, '') = u.lease_id
       AND CASE WHEN r.status = 'running' THEN true ELSE false END  -- by key (conventions)
       AND r.executor_id = $5
     ORDER BY r.job_id, r.scheduled_at
       FOR UPDATE OF r
)
UPDATE job_runs r
   SET status = 'succeeded',
       check_at = NULL,
       next_attempt_at = NULL,
       finished_at = $9,
       lease_until = NULL,
       last_error = coalesce(h.last_error, r.last_error),
       last_http_status = h.http_status,
       last_grpc_code = h.grpc_code,
       updated_at = $9
  FROM held h
 WHERE r.job_id = h.job_id AND r.scheduled_at = h.scheduled_at
RETURNING r.job_id, r.scheduled_at, r.tenant_id, h.fixed_delay;

-- name: record_completion_stats
-- Per-job completion counters, for jobs that still exist. consecutive_dead counts the
-- dead runs in a row (the failure policy's count): a success resets it (one in the same
-- batch as dead runs of the job wins: their order within a batch is not known). The
-- streak a success ended is kept in recovered_streak (migration 0024; 0 otherwise) and
-- returned, so the caller tells RECOVERED for it: one more column of a row this
-- statement writes anyway (no index: the update stays HOT).
INSERT INTO job_stats AS s (job_id, succeeded_count, dead_count, cancelled_count,
                            last_success_at, last_failure_at, updated_at, consecutive_dead)
SELECT u.job_id, sum(u.succeeded), sum(u.dead), sum(u.cancelled), max(u.success_at),
       max(u.failure_at), $7, CASE WHEN sum(u.succeeded) > 0 THEN 0 ELSE sum(u.dead) END
  FROM unnest($1::uuid[], $2::int[], $3::int[], $4::int[], $5::timestamptz[],
              $6::timestamptz[])
       AS u(job_id, succeeded, dead, cancelled, success_at, failure_at)
 WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = u.job_id)
 GROUP BY u.job_id
 ORDER BY u.job_id  -- rows locked in key order, as the dispatcher does: no deadlock
ON CONFLICT (job_id) DO UPDATE
   SET succeeded_count = s.succeeded_count + EXCLUDED.succeeded_count,
       dead_count = s.dead_count + EXCLUDED.dead_count,
       cancelled_count = s.cancelled_count + EXCLUDED.cancelled_count,
       last_success_at = greatest(s.last_success_at, EXCLUDED.last_success_at),
       last_failure_at = greatest(s.last_failure_at, EXCLUDED.last_failure_at),
       consecutive_dead = CASE WHEN EXCLUDED.succeeded_count > 0 THEN 0
                               ELSE s.consecutive_dead + EXCLUDED.dead_count END,
       recovered_streak = CASE WHEN EXCLUDED.succeeded_count > 0 THEN s.consecutive_dead
                               ELSE 0 END,
       updated_at = EXCLUDED.updated_at
RETURNING s.job_id, s.recovered_streak;

-- name: record_job_events
-- The notification outbox (migration 0014): events $2 (kinds) about jobs $1, with
-- details $3 (JSON text) that occurred at $4, one row per channel of the job's tenant
-- that wants that kind, due when the channel's digest window ends. Nothing is written
-- for a tenant without such a channel. Written in the transaction of the fact (a dead
-- run, a skipped misfire, a late run), so the event exists exactly when the fact does.
INSERT INTO notification_events (channel_id, tenant_id, kind, job_id, detail, occurred_at,
                                 due_at)
SELECT c.channel_id, j.tenant_id, e.kind, e.job_id,
       e.detail::jsonb || jsonb_build_object('job_id', e.job_id, 'job_name', j.name),
       e.occurred_at, e.occurred_at + make_interval(secs => c.digest_window_s)
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[])
       AS e(job_id, kind, detail, occurred_at)
  JOIN jobs j ON j.job_id = e.job_id
  JOIN notification_channels c ON c.tenant_id = j.tenant_id AND e.kind = ANY(c.event_kinds);

-- name: mark_failure_pauses
-- Of the jobs $1 whose runs just died (each with its last error $2; their job_stats rows
-- were written by this transaction), those not paused whose dead runs in a row reached
-- their failure policy's pause_after_consecutive_dead are due a pause, with its reason.
UPDATE job_stats s
   SET pause_due = true,
       -- A pause note holds 1,024 chars (the API's limit on notes, which UpdateJob and
       -- ApplyJob check again on the note they keep): the error is cut to fit.
       pause_reason = left(format('paused by failure policy after %s consecutive dead runs; '
                                  'last error: %s', s.consecutive_dead,
                                  coalesce(u.error, '')), 1024)
  FROM unnest($1::uuid[], $2::text[]) AS u(job_id, error)
  JOIN job_definitions d ON d.job_id = u.job_id
  JOIN jobs j ON j.job_id = u.job_id
 WHERE s.job_id = u.job_id AND NOT s.pause_due AND NOT j.paused
   AND coalesce((d.policies -> 'failure' ->> 'pause_after_consecutive_dead')::int, 0) > 0
   AND s.consecutive_dead >= (d.policies -> 'failure' ->> 'pause_after_consecutive_dead')::int
RETURNING s.job_id;

-- name: apply_failure_pauses
-- Pauses the jobs $1 that mark_failure_pauses made due (migration 0014's function:
-- SKIP LOCKED on the jobs rows; one left locked waits for the sweeper).
SELECT job_id FROM sundial_apply_failure_pauses($1::uuid[], $2::timestamptz) AS p(job_id);

-- name: due_failure_pauses
-- The sweeper's backstop: up to $2 jobs of partitions $1 still due a failure-policy pause
-- (their row was locked when their run died). One probe of the nearly always empty
-- partial index job_stats_pause_due_idx first (MATERIALIZED), and jobs only for what
-- it found: a plan that began with jobs tested every job's partition against the array
-- of owned ones, 4-11 ms a pass in a 3k herd, and passes run 20 times a second while
-- runs wait for admission. apply_failure_pauses runs only for what this finds.
WITH due AS MATERIALIZED (
    SELECT job_id FROM job_stats WHERE pause_due
)
SELECT d.job_id
  FROM due d
  JOIN jobs j ON j.job_id = d.job_id
 WHERE j.partition_id = ANY($1::smallint[])
 ORDER BY d.job_id
 LIMIT $2;

-- name: cancel_requested
-- Of the held runs ($1/$2 at attempt $3 under lease $4), those still RUNNING under that
-- lease that were
-- asked to stop (CancelRun, CANCEL_OTHER, DeleteJob) since the last heartbeat.
SELECT r.job_id, r.scheduled_at, r.attempt, h.lease_id
  FROM job_runs r
  JOIN unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[])
       AS h(job_id, scheduled_at, attempt, lease_id)
    ON r.job_id = h.job_id AND r.scheduled_at = h.scheduled_at AND r.attempt = h.attempt
   AND coalesce(r.lease_id::text, '') = h.lease_id
 WHERE CASE WHEN r.status = 'running' THEN r.cancel_requested ELSE false END;  -- by key

-- ---------------------------------------------------------------------------------------
-- Admission (flow control, docs/design.md section 7 "Flow control"; admission.py)
-- ---------------------------------------------------------------------------------------

-- name: lock_admission
-- Serialises admission per tenant $1 (sorted: no deadlock) across dispatch workers and
-- sweepers of every scheduler, so a tenant's window holds: the count of its runs in
-- flight (admission_terms) stays true until the commit, but for runs that finish.
SELECT pg_advisory_xact_lock(hashtextextended('sundial.admit:' || t.tenant_id, 0))
  FROM (SELECT DISTINCT tenant_id FROM unnest($1::text[]) AS u(tenant_id) ORDER BY 1) AS t;

-- name: try_lock_admission
-- The admission locks of tenants $1 that a dispatch or a sweep's due retries ask for:
-- taken where free (or already held by this transaction), never waited for (a dispatch
-- holds its claimed jobs rows, a sweep its due runs' rows, which a waiting transaction
-- would keep from PauseJob and the other workers); whether each was taken.
SELECT t.tenant_id,
       pg_try_advisory_xact_lock(hashtextextended('sundial.admit:' || t.tenant_id, 0))
           AS locked
  FROM (SELECT DISTINCT tenant_id FROM unnest($1::text[]) AS u(tenant_id) ORDER BY 1) AS t;

-- name: admission_terms
-- Per tenant $1 (locked by lock_admission): its weight (NULL: the operator's default),
-- its runs in the stream, published and not leased (job_runs_tenant_inflight_idx; at
-- most about its window), and whether runs of it wait already.
SELECT t.tenant_id, t.fair_weight,
       sundial_inflight_runs(t.tenant_id) AS in_flight,  -- planned once (migration 0029)
       EXISTS (SELECT 1 FROM run_waits w WHERE w.tenant_id = t.tenant_id) AS waiting
  FROM tenants t
 WHERE t.tenant_id = ANY($1::text[]);

-- name: tenant_weights
-- The fair-sharing weights of tenants $1 (NULL: the operator's default), for the
-- message of a republish (apply_checks).
SELECT tenant_id, fair_weight FROM tenants WHERE tenant_id = ANY($1::text[]);

-- name: admission_keys
-- The rate-limit keys of tenants $1 that hold runs at admission: a rate limit, or a
-- target's Retry-After not over at $2.
SELECT tenant_id, key, rate_per_s, burst, tokens, refilled_at, blocked_until
  FROM flow_limits
 WHERE tenant_id = ANY($1::text[]) AND (rate_per_s > 0 OR blocked_until > $2);

-- name: job_origins
-- The targets of jobs $1, to resolve their runs' default rate-limit key (the origin);
-- asked only for tenants with rate limits.
SELECT job_id, target::text AS target FROM job_definitions WHERE job_id = ANY($1::uuid[]);

-- name: insert_run_waits
-- The waiting list's rows of runs this dispatch inserted to wait (queued, never
-- published, no check_at), or of due retries a sweep holds (written queued, unpublished,
-- no check_at just before); a run key in another state is not ours and gets none.
-- $9[i]: the run's rate-limit key holds it (throttled, migration 0022). $10: every run
-- key of the dispatch was new (insert_runs' count), so every row is ours and no run
-- row is probed (the usual case; CASE evaluates its branches in order, so the probe is
-- made only when some key existed before).
INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id, priority, due_at,
                       rate_key, created_at, throttled)
SELECT w.job_id, w.scheduled_at, w.tenant_id, w.partition_id, w.priority, w.due_at,
       w.rate_key, $8, w.throttled
  FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::smallint[], $5::smallint[],
              $6::timestamptz[], $7::text[], $9::boolean[])
       AS w(job_id, scheduled_at, tenant_id, partition_id, priority, due_at, rate_key,
            throttled)
 WHERE CASE WHEN $10::boolean THEN true
            ELSE EXISTS (SELECT 1 FROM job_runs r
                          WHERE r.job_id = w.job_id AND r.scheduled_at = w.scheduled_at
                            AND CASE WHEN r.status = 'queued' AND r.dispatch_seq = 0
                                          AND r.check_at IS NULL
                                     THEN true ELSE false END) END
ON CONFLICT (job_id, scheduled_at) DO NOTHING;

-- name: waiting_tenants
-- Up to $2 tenants with waiting runs, from the first after $1 on (a skip scan of
-- run_waits_order_idx: one probe per tenant, however many runs wait).
WITH RECURSIVE t(tenant_id) AS (
    (SELECT tenant_id FROM run_waits WHERE tenant_id > $1 ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT w.tenant_id FROM run_waits w
             WHERE w.tenant_id > t.tenant_id ORDER BY w.tenant_id LIMIT 1)
      FROM t
     WHERE t.tenant_id IS NOT NULL
)
SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL LIMIT $2;

-- name: next_waiting
-- Up to $4 waiting runs of tenant $1 in partitions $2, the highest priority and oldest
-- due first: of rate-limit key $3 when it is not NULL, else of any key but the held
-- ones $5. Read in run_waits_order_idx's order whatever the statistics say (migration
-- 0027: analyzed before a herd, the planner sorted the tenant's whole waiting list for
-- each pass).
SELECT job_id, scheduled_at, partition_id
  FROM sundial_next_waiting($1, $2::smallint[], $3, $4, $5::text[]);

-- name: admit_runs
-- Admits and publishes the waiting runs $1/$2: their waiting rows go, and each run
-- still waiting (queued, unpublished: not cancelled meanwhile) gets its dispatch
-- sequence $3[i] and check_at $5, the publish-confirm deadline, as a dispatch writes
-- them: the sweep publishes them after its commit. A first publish (attempt 0; a due
-- retry that waited keeps both: they describe its run's first start) has its lateness
-- measured now ($4), from its due time, and is throttled (migration 0022) when its
-- rate-limit key held it at dispatch (run_waits.throttled) or holds it now ($6[i]).
-- Returns the runs admitted.
WITH k AS (
    SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $6::boolean[])
                  AS k(job_id, scheduled_at, dispatch_seq, throttled)
), gone AS (
    -- Each key's waiting row found by a primary-key probe (OFFSET 0 keeps the probe per
    -- key) and deleted by its row address: a join of k with run_waits was planned as a
    -- scan of the whole waiting list per call, a cost growing with the herd.
    DELETE FROM run_waits w
     USING k CROSS JOIN LATERAL (
               SELECT v.ctid AS wait_row
                 FROM run_waits v
                WHERE v.job_id = k.job_id AND v.scheduled_at = k.scheduled_at
               OFFSET 0) AS x
     WHERE w.ctid = x.wait_row
    RETURNING w.job_id, w.scheduled_at, w.due_at, w.throttled
)
UPDATE job_runs r
   SET dispatch_seq = k.dispatch_seq, check_at = $5, updated_at = $4,
       throttled = CASE WHEN r.attempt = 0 THEN k.throttled OR g.throttled
                        ELSE r.throttled END,
       lateness_ms = CASE WHEN r.kind = 'scheduled' AND r.attempt = 0
                          THEN greatest(0, (extract(epoch FROM $4 - g.due_at) * 1000)::bigint)
                          ELSE r.lateness_ms END
  FROM gone g
  JOIN k ON k.job_id = g.job_id AND k.scheduled_at = g.scheduled_at
 WHERE r.job_id = g.job_id AND r.scheduled_at = g.scheduled_at
   AND CASE WHEN r.status = 'queued' AND r.dispatch_seq = 0 AND r.check_at IS NULL
            THEN true ELSE false END  -- by key (the conventions above)
RETURNING r.job_id, r.scheduled_at, r.tenant_id, r.partition_id, r.dispatch_seq;

-- name: spend_tokens
-- The token buckets of (tenant $1[i], key $2[i]) after an admission took from them:
-- $3[i] tokens left at $4. The bucket's clock never goes back: a pass that read its
-- clock before waiting for the admission lock has an older $4 than the pass that held
-- the lock wrote (it counted no refill, so its tokens hold as of the later instant);
-- winding refilled_at back to it would count that refill again.
UPDATE flow_limits f
   SET tokens = u.tokens, refilled_at = GREATEST(f.refilled_at, $4)
  FROM unnest($1::text[], $2::text[], $3::float8[]) AS u(tenant_id, key, tokens)
 WHERE f.tenant_id = u.tenant_id AND f.key = u.key;

-- name: block_keys
-- A target answered 429 with Retry-After: no run of (tenant $1[i], key $2[i]) is
-- admitted before $3[i] (a key without a limit gets a row that only blocks).
INSERT INTO flow_limits AS f (tenant_id, key, blocked_until)
SELECT u.tenant_id, u.key, u.until
  FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(tenant_id, key, until)
  JOIN tenants t ON t.tenant_id = u.tenant_id
ON CONFLICT (tenant_id, key) DO UPDATE
   SET blocked_until = GREATEST(f.blocked_until, EXCLUDED.blocked_until);

-- name: rate_keys_of
-- What the rate-limit key of jobs $1's runs is made of: the job's own key, else its
-- target's origin. Asked only for runs whose target answered 429 with Retry-After.
SELECT d.job_id, j.tenant_id, d.policies -> 'flow' ->> 'rate_limit_key' AS rate_limit_key,
       d.target::text AS target
  FROM job_definitions d
  JOIN jobs j ON j.job_id = d.job_id
 WHERE d.job_id = ANY($1::uuid[]);

-- name: sealed_secrets
-- The sealed values of the (tenant, name) pairs $1, $2 a LeaseRuns call's grants
-- reference (tenant secrets, migration 0021; opened by the ledger only).
SELECT s.tenant_id, s.name, s.kek_id, s.wrapped_key, s.nonce, s.ciphertext
  FROM tenant_secrets s
  JOIN unnest($1::text[], $2::text[]) AS wanted (tenant_id, name)
    ON s.tenant_id = wanted.tenant_id AND s.name = wanted.name;

-- name: signing_identity_key
-- The identity-token key that signs at $1 (now): the newest not retired (migration
-- 0023); none when no key was made yet.
SELECT kid, kek_id, wrapped_key, nonce, ciphertext
  FROM identity_keys
 WHERE retire_at IS NULL OR retire_at > $1
 ORDER BY (retire_at IS NULL) DESC, created_at DESC, kid
 LIMIT 1;
