-- Sundial's initial schema (DESIGN.md section 5). Forward-only: never edit this file once
-- released (its checksum is recorded); change the schema in a new numbered file.
--
-- Time: every instant is timestamptz (a UTC instant); sessions run with timezone=UTC.
-- Ids: jobs are uuid; tenants are short text ids that also appear in NATS subjects.

-- ---------------------------------------------------------------------------------------
-- Tenants and credentials
-- ---------------------------------------------------------------------------------------

CREATE TABLE tenants (
    -- A NATS subject token (sundial.dead.<tenant>) and a log field: keep it plain.
    tenant_id           text PRIMARY KEY CHECK (tenant_id ~ '^[A-Za-z0-9_-]{1,64}$'),
    name                text NOT NULL,
    max_jobs            integer NOT NULL DEFAULT 10000 CHECK (max_jobs >= 0),
    max_concurrent_runs integer NOT NULL DEFAULT 100 CHECK (max_concurrent_runs > 0),
    -- HMAC key for the signature on every call to this tenant's targets. Stored as is:
    -- Sundial must compute the HMAC, so it cannot keep only a hash.
    signing_secret      bytea NOT NULL CHECK (length(signing_secret) >= 32),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    token_id    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL for admin tokens, which belong to no tenant.
    tenant_id   text REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('tenant', 'admin')),
    -- sha256 of the token; the token itself is shown once at creation and never stored.
    -- Unique, so authentication is one index lookup by hash.
    token_hash  bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    -- The first characters of the token, so people can tell their tokens apart.
    prefix      text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz,
    CONSTRAINT api_tokens_role_tenant CHECK ((role = 'admin') = (tenant_id IS NULL))
);

CREATE INDEX api_tokens_tenant_idx ON api_tokens (tenant_id) WHERE tenant_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Jobs: three tables with one row each per job, split by who writes them how often.
--
--   jobs             the hot path. The dispatcher locks rows here (FOR UPDATE SKIP
--                    LOCKED) and advances next_run_at on every fire. next_run_at is
--                    indexed, so these updates are never HOT: each writes a whole new row
--                    version plus an entry in every index. The row is therefore kept
--                    narrow (~100 bytes) and holds only what the claim needs.
--   job_definitions  what the API writes (schedule, target, payload, policies, labels).
--                    A jsonb column in `jobs` would be copied by every dispatch update
--                    (values under ~2 kB are stored inline, not TOASTed), so it lives here
--                    and is written only by CreateJob/UpdateJob/PauseJob.
--   job_stats        written by the dispatcher (last fire, lateness) and by the ledger on
--                    every completion. Kept out of `jobs` so a completion never locks a
--                    jobs row, which the dispatcher's SKIP LOCKED would then skip (a late
--                    run). No indexed column changes here, so its updates are HOT.
--
-- Lock order: a transaction touching several of these locks jobs, then job_runs, then
-- job_stats (update stats last), so the dispatcher and the ledger cannot deadlock.
-- ---------------------------------------------------------------------------------------

CREATE TABLE jobs (
    job_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    -- "C" collation: byte order, so ListJobs' name-prefix filter and name-ordered pages
    -- use the (tenant_id, name) index, and order does not depend on the server's locale.
    name         text COLLATE "C" NOT NULL CHECK (name <> ''),
    -- A stable hash of job_id mod 256 computed by the API (never a UUID's leading
    -- bytes): the unit of scheduler ownership.
    partition_id smallint NOT NULL CHECK (partition_id BETWEEN 0 AND 255),
    -- The next nominal fire time (UTC). NULL: the schedule is exhausted (end_time,
    -- max_runs or a fired `once`); such a job is kept for its history until deleted.
    next_run_at  timestamptz,
    paused       boolean NOT NULL DEFAULT false,
    -- Definition version for UpdateJob's expected_version; bumped by the API only,
    -- never by dispatch.
    version      bigint NOT NULL DEFAULT 1 CHECK (version >= 1),
    -- Scheduled occurrences dispatched so far (for max_runs); manual and backfill runs
    -- do not count.
    fired_count  bigint NOT NULL DEFAULT 0 CHECK (fired_count >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Last definition change (dispatch does not touch it).
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_tenant_id_name_key UNIQUE (tenant_id, name)
) WITH (
    -- Room on each page for the new row version a dispatch update writes, and vacuum
    -- after 2% of rows changed instead of 20%: every job is rewritten once per fire, so
    -- with millions of jobs the default lets dead versions pile up for hours.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- The dispatcher's claim: due jobs of owned partitions, oldest first.
CREATE INDEX jobs_due_idx ON jobs (partition_id, next_run_at) WHERE NOT paused;

CREATE TABLE job_definitions (
    job_id      uuid PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    -- Schedule{cron|interval|once, time_zone, start_time, end_time, jitter, dst,
    -- max_runs}, Target{http|grpc} and Policies{misfire, overlap, retry, run_timeout...}
    -- as JSON documents written and read only by the services' convert code.
    schedule    jsonb NOT NULL CHECK (jsonb_typeof(schedule) = 'object'),
    target      jsonb NOT NULL CHECK (jsonb_typeof(target) = 'object'),
    policies    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(policies) = 'object'),
    -- Opaque bytes sent to the target as the body; large ones are TOASTed.
    payload     bytea NOT NULL DEFAULT '',
    labels      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    description text NOT NULL DEFAULT '',
    pause_note  text NOT NULL DEFAULT ''
);

-- ListJobs' label filter (labels @> '{"team": "billing"}').
CREATE INDEX job_definitions_labels_idx ON job_definitions USING gin (labels jsonb_path_ops);

CREATE TABLE job_stats (
    job_id           uuid PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    -- Nominal time of the latest dispatched occurrence, and when it was dispatched.
    last_fire_at     timestamptz,
    last_dispatch_at timestamptz,
    last_lateness_ms bigint,
    last_success_at  timestamptz,
    last_failure_at  timestamptz,
    succeeded_count  bigint NOT NULL DEFAULT 0,
    dead_count       bigint NOT NULL DEFAULT 0,
    -- Occurrences recorded as `skipped` runs (overlap policy SKIP).
    skipped_count    bigint NOT NULL DEFAULT 0,
    -- Occurrences dropped by the misfire policy (SKIP, or beyond max_catchup): these
    -- get no run row, so this counter is their only trace.
    missed_count     bigint NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL DEFAULT now()
) WITH (
    fillfactor = 70,  -- updates are HOT when the new version fits on the same page
    autovacuum_vacuum_scale_factor = 0.02
);

-- CreateJob idempotency: a retried request with the same request_id returns the job the
-- first one created; the same id with a different request (hash) is an error. Rows are
-- purged by age (created_at), not by job deletion: a retry after a delete must not
-- silently create a second job.
CREATE TABLE job_requests (
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    request_id   text NOT NULL CHECK (request_id <> ''),
    request_hash bytea NOT NULL,
    job_id       uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, request_id)
);

CREATE INDEX job_requests_created_at_idx ON job_requests (created_at);

-- ---------------------------------------------------------------------------------------
-- Runs: one row per run key (job_id, scheduled_at), partitioned by UTC day of
-- scheduled_at. Retention drops whole partitions (sundial_drop_run_partitions_before),
-- which costs no vacuum; the default partition catches rows whose day has no partition
-- yet, and sundial_ensure_run_partitions moves them out when it creates that day.
--
-- No foreign keys to jobs or tenants: runs are history that outlives a deleted job until
-- retention drops it, and an FK check on every dispatch insert would lock the jobs row.
-- ---------------------------------------------------------------------------------------

CREATE TABLE job_runs (
    job_id           uuid NOT NULL,
    -- The nominal occurrence (manual runs: the trigger instant). Jitter never changes it.
    scheduled_at     timestamptz NOT NULL,
    tenant_id        text NOT NULL,
    partition_id     smallint NOT NULL CHECK (partition_id BETWEEN 0 AND 255),
    kind             text NOT NULL DEFAULT 'scheduled'
                     CHECK (kind IN ('scheduled', 'manual', 'backfill')),
    status           text NOT NULL CHECK (status IN ('pending', 'queued', 'running',
                     'retrying', 'succeeded', 'dead', 'skipped', 'cancelled')),
    -- Fencing token: incremented by every lease grant, never reset (not even by
    -- ReplayRun); results are written only WHERE attempt = the executor's attempt.
    attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- `attempt` when the current retry budget began: 0, or the attempt at the last
    -- ReplayRun. Failures so far = attempt - attempt_base.
    attempt_base     integer NOT NULL DEFAULT 0 CHECK (attempt_base >= 0),
    -- Incremented by every (re)publish; part of the JetStream message id
    -- (<run_key>#<dispatch_seq>), so a retried publish dedups and a republish does not.
    dispatch_seq     bigint NOT NULL DEFAULT 0,
    -- When the scheduler must look at this run again: publish not confirmed, lease
    -- expiry, retry due. NULL: nothing to check.
    check_at         timestamptz,
    lease_until      timestamptz,
    executor_id      text,
    started_at       timestamptz,
    finished_at      timestamptz,
    next_attempt_at  timestamptz,
    -- Dispatch time minus the due time (scheduled_at plus jitter), in milliseconds.
    lateness_ms      bigint,
    last_error       text,
    -- retryable | final | timeout | cancelled ... as classified by the executor.
    error_class      text,
    skip_reason      text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Also serves "a job's runs, newest first" (a backward scan per partition).
    PRIMARY KEY (job_id, scheduled_at)
) PARTITION BY RANGE (scheduled_at);

-- Runs move queued -> running -> succeeded within seconds of being inserted: leave room
-- on the page for those versions.
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT WITH (fillfactor = 90);

-- Every sweep (unconfirmed publish, expired lease, retry due) is one range scan of this
-- index over the owned partitions. Sweep queries must repeat this status predicate.
CREATE INDEX job_runs_check_idx ON job_runs (partition_id, check_at)
    WHERE status IN ('queued', 'running', 'retrying');

-- The per-tenant concurrency cap counts running runs at lease time.
CREATE INDEX job_runs_tenant_running_idx ON job_runs (tenant_id) WHERE status = 'running';

-- Overlap policies ask "does this job have an unfinished run?" for a batch of jobs. The
-- primary key would scan every run of each job; this index holds only live runs.
CREATE INDEX job_runs_unfinished_idx ON job_runs (job_id)
    WHERE status IN ('pending', 'queued', 'running', 'retrying');

-- ---------------------------------------------------------------------------------------
-- Run-history partitions (called by the scheduler's maintenance loop)
-- ---------------------------------------------------------------------------------------

-- Creates the daily partitions job_runs_YYYYMMDD for every UTC day in [p_start, p_end]
-- that has none, and returns the names it created.
--
-- Each day is created standalone, filled, then attached, instead of
-- CREATE TABLE ... PARTITION OF:
--   * PostgreSQL refuses to add a partition for a range the default partition already
--     holds rows of. Those rows (runs inserted before their day was created) are moved
--     first: DELETE ... RETURNING from the default partition into the new table, then
--     ATTACH PARTITION, all in this function's single transaction.
--   * ATTACH PARTITION takes only SHARE UPDATE EXCLUSIVE on job_runs, so dispatch
--     inserts and sweeps keep running; CREATE TABLE ... PARTITION OF would take ACCESS
--     EXCLUSIVE on job_runs. The default partition is locked exclusively first, so no
--     row for the day can land there between the move and the attach.
-- lock_timeout keeps a waiting lock from queueing every other query behind it; the
-- caller retries on the next maintenance pass (55P03 -> Aborted).
CREATE FUNCTION sundial_ensure_run_partitions(p_start date, p_end date)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET lock_timeout = '5s'
AS $fn$
DECLARE
    v_day   date;
    v_name  text;
    v_lower timestamptz;
    v_upper timestamptz;
BEGIN
    IF p_start IS NULL OR p_end IS NULL THEN
        RAISE EXCEPTION 'start and end must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_end - p_start > 400 THEN
        RAISE EXCEPTION 'refusing to create % partitions at once', p_end - p_start + 1
            USING ERRCODE = '22023';
    END IF;
    -- Serialise with other schedulers doing the same and with the drop below.
    PERFORM pg_advisory_xact_lock(6004186327350937411);
    FOR v_day IN SELECT d::date FROM generate_series(p_start, p_end, interval '1 day') AS d
    LOOP
        v_name := 'job_runs_' || to_char(v_day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(quote_ident(v_name)) IS NOT NULL;
        v_lower := v_day::timestamp AT TIME ZONE 'UTC';
        v_upper := (v_day + 1)::timestamp AT TIME ZONE 'UTC';
        LOCK TABLE job_runs_default IN ACCESS EXCLUSIVE MODE;
        EXECUTE format(
            'CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
            ' WITH (fillfactor = 90)', v_name);
        EXECUTE format(
            'WITH moved AS (DELETE FROM job_runs_default'
            ' WHERE scheduled_at >= $1 AND scheduled_at < $2 RETURNING *)'
            ' INSERT INTO %I SELECT * FROM moved', v_name)
            USING v_lower, v_upper;
        EXECUTE format('ALTER TABLE job_runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       v_name, v_lower, v_upper);
        RETURN NEXT v_name;
    END LOOP;
END
$fn$;

-- Drops the daily partitions entirely before p_cutoff (a UTC day: the partition for day
-- d holds [d, d+1), so it goes when d < p_cutoff) and returns their names. Only tables
-- attached to job_runs and named job_runs_YYYYMMDD; never the default partition.
-- Dropping a partition locks job_runs briefly (ACCESS EXCLUSIVE), hence lock_timeout.
CREATE FUNCTION sundial_drop_run_partitions_before(p_cutoff date)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET lock_timeout = '5s'
AS $fn$
DECLARE
    v_name text;
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
        EXECUTE format('DROP TABLE %I', v_name);
        RETURN NEXT v_name;
    END LOOP;
END
$fn$;
