-- The API service's SQL. Only sundial.api.store runs it.
--
-- Every job and run query is scoped by tenant_id: another tenant's row is simply not
-- found. "Now" is always a parameter (the API's clock), never now(), so the instants
-- the API computes with and the ones it stores agree, and tests control time.
--
-- Lock order (migration 0001): jobs, then job_runs, then job_stats. The tenant row (the
-- max_jobs counter) is locked first by creates, which lock no existing job row, and
-- last by DeleteJob.

-- --- select lists: one per resource, spliced where a query says {name} -----------------

-- fragment: job_select
-- A job as the store's job_from_row reads it: its row, its definition, its stats.
SELECT j.job_id, j.tenant_id, j.name, j.partition_id, j.next_run_at, j.paused, j.version,
       j.fired_count, j.created_at, j.updated_at, j.client_job_id, j.pause_until,
       d.schedule, d.target, d.policies, d.payload, d.labels, d.description, d.pause_note,
       d.calendars,
       j.last_fire_at, s.last_success_at, s.last_failure_at, j.last_lateness_ms,
       s.succeeded_count, s.dead_count, s.skipped_count, s.missed_count, s.cancelled_count
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
  LEFT JOIN job_stats s ON s.job_id = j.job_id

-- fragment: run_columns
-- A run as run_from_row reads it; the query names job_runs "r".
r.job_id, r.scheduled_at, r.kind, r.status, r.attempt, r.lease_until, r.executor_id,
r.started_at, r.finished_at, r.next_attempt_at, r.lateness_ms, r.last_error, r.error_class,
r.skip_reason, r.cancel_requested, r.created_at, r.replay_count, r.last_http_status,
r.last_grpc_code

-- fragment: job_filters
-- Which of tenant $1's jobs a list, a count or a bulk action covers (sundial.api.selector,
-- docs/design.md section 13), the query naming jobs "j" and job_definitions "d"; each
-- filter only when given: $2 labels every job carries (a document keyed by the tenant,
-- {"<tenant>": {...}}, for the tenant-keyed GIN index of migration 0024), $3 the rest of
-- a label selector (an SQL/JSON path predicate on the labels), $4 a lower-case substring
-- of the name or description, $5 and $6 a name range [$5, $6) (a prefix), $7 paused.
d.tenant_id = $1
   AND ($2::jsonb IS NULL OR sundial_tenant_labels(d.tenant_id, d.labels) @> $2::jsonb)
   AND ($3::jsonpath IS NULL OR d.labels @@ $3::jsonpath)
   AND ($4::text IS NULL
        OR strpos(lower(j.name), $4::text) > 0 OR strpos(lower(d.description), $4::text) > 0)
   AND ($5::text IS NULL OR j.name >= $5::text)
   AND ($6::text IS NULL OR j.name < $6::text)
   AND ($7::boolean IS NULL OR j.paused = $7::boolean)

-- fragment: calendar_columns
-- A calendar as calendar_from_row reads it.
name, description, kind, dates, version, created_at, updated_at

-- name: get_job
{job_select}
 WHERE j.job_id = $1 AND j.tenant_id = $2;

-- name: get_jobs
-- The jobs $1 of tenant $2 (any order; the caller restores the order it needs).
{job_select}
 WHERE j.job_id = ANY($1::uuid[]) AND j.tenant_id = $2;

-- name: job_uid
-- The uid of tenant $1's job whose client-chosen id is $2 (jobs_tenant_client_job_id_key).
SELECT job_id FROM jobs WHERE tenant_id = $1 AND client_job_id = $2;

-- name: list_jobs
-- A page of tenant $1's jobs by name after $8 matching the filters $2-$7 (job_filters),
-- $9 rows. The (tenant_id, name) unique index (byte order, "C" collation) serves the
-- order, the cursor and the prefix range; a label document probes the tenant-keyed GIN
-- index (migration 0024) instead when it is the more selective.
{job_select}
 WHERE j.tenant_id = $1
   AND {job_filters}
   AND j.name > $8
 ORDER BY j.name
 LIMIT $9;

-- name: existing_names
-- Which of the names $2 tenant $1 already uses (to name the clashing batch entry).
SELECT name FROM jobs WHERE tenant_id = $1 AND name = ANY($2::text[]);

-- name: existing_client_job_ids
-- Which of the client job ids $2 tenant $1 already uses (likewise).
SELECT client_job_id FROM jobs WHERE tenant_id = $1 AND client_job_id = ANY($2::text[]);

-- name: insert_jobs
-- Inserts jobs for tenant :tenant_id at :now with their definitions and empty stats, if
-- the tenant's max_jobs allows them: one set-based statement for one job or a thousand.
-- Parameters by name (store._params.InsertJobs; the plural ones are arrays, one entry
-- per job): :client_job_ids has NULL entries for jobs named by their uid;
-- :traceparent is the creating call's trace context (NULL while tracing is off);
-- :changed_by and :request_id go to the revisions (migration 0012); :calendars holds
-- the referenced calendars' contents per job, NULL entries for jobs without calendars
-- (migration 0015).
-- The JSON columns (schedules, targets, policies, labels, calendars) come as text
-- (sundial.core.db.json_text): a batch encodes each distinct document once, and asyncpg
-- would read a list of lists as a two-dimensional array.
-- Returns how many were inserted: 0 when the quota refused them (nothing written).
-- The inserts read the quota update's result, so it runs first; the tenant row then
-- stays locked only for this statement and the commit (CreateJob without request_id
-- runs it alone in autocommit: no client round trip while the lock is held). The
-- foreign keys of job_definitions and job_stats are checked at the end of the
-- statement, after the jobs rows exist.
WITH quota AS (
    UPDATE tenants
       SET job_count = job_count + cardinality(:job_ids::uuid[])
     WHERE tenant_id = :tenant_id AND job_count + cardinality(:job_ids::uuid[]) <= max_jobs
    RETURNING tenant_id
), input AS (
    SELECT t.job_id, t.name, t.partition_id, t.next_run_at, t.paused,
           t.schedule::jsonb AS schedule, t.target::jsonb AS target,
           t.policies::jsonb AS policies, t.payload, t.labels::jsonb AS labels,
           t.description, t.pause_note, t.client_job_id, t.calendars::jsonb AS calendars
      FROM unnest(:job_ids::uuid[], :names::text[], :partition_ids::smallint[],
                  :next_run_ats::timestamptz[], :paused::boolean[], :schedules::text[],
                  :targets::text[], :policies::text[], :payloads::bytea[], :labels::text[],
                  :descriptions::text[], :pause_notes::text[], :client_job_ids::text[],
                  :calendars::text[])
           AS t(job_id, name, partition_id, next_run_at, paused, schedule, target, policies,
                payload, labels, description, pause_note, client_job_id, calendars)
     WHERE EXISTS (SELECT 1 FROM quota)
), new_jobs AS (
    INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at, paused,
                      created_at, updated_at, definition_digest, client_job_id,
                      create_traceparent)
    SELECT job_id, :tenant_id, name, partition_id, next_run_at, paused, :now, :now,
           sundial_definition_digest(schedule, policies, calendars),  -- migration 0015
           client_job_id, :traceparent::text
      FROM input
    RETURNING job_id
), new_definitions AS (
    INSERT INTO job_definitions (job_id, schedule, target, policies, payload, labels,
                                 description, pause_note, changed_by, change_request_id,
                                 calendars, calendar_keys, tenant_id)
    SELECT job_id, schedule, target, policies, payload, labels, description, pause_note,
           :changed_by::text, :request_id::text, calendars,
           sundial_calendar_keys(:tenant_id, schedule),  -- migration 0017
           :tenant_id  -- migration 0024
      FROM input
), new_stats AS (
    INSERT INTO job_stats (job_id, updated_at) SELECT job_id, :now FROM input
)
SELECT count(*) FROM new_jobs;

-- name: quota_usage
SELECT job_count, max_jobs FROM tenants WHERE tenant_id = $1;

-- name: remove_job_from_quota
UPDATE tenants SET job_count = greatest(job_count - 1, 0) WHERE tenant_id = $1;

-- name: find_request
-- An idempotency record of tenant $1, method $2, request_id $3 newer than $4.
SELECT request_hash, job_id, job_ids, scheduled_at, outcome
  FROM job_requests
 WHERE tenant_id = $1 AND method = $2 AND request_id = $3 AND created_at >= $4;

-- name: claim_request
-- Records request :request_id of :method for :tenant_id at :now (what it did: :job_id,
-- :job_ids, :scheduled_at, :outcome), taking over a record created before
-- :expired_before. Returns no row when a live record exists; a concurrent claim of the
-- same key waits here until the other transaction ends, which serialises duplicates.
-- Parameters by name (store._params.ClaimRequest).
INSERT INTO job_requests AS r (tenant_id, method, request_id, request_hash, job_id, job_ids,
                               scheduled_at, created_at, outcome)
VALUES (:tenant_id, :method, :request_id, :request_hash, :job_id, :job_ids, :scheduled_at,
        :now, :outcome)
ON CONFLICT (tenant_id, method, request_id) DO UPDATE
   SET request_hash = EXCLUDED.request_hash,
       job_id = EXCLUDED.job_id,
       job_ids = EXCLUDED.job_ids,
       scheduled_at = EXCLUDED.scheduled_at,
       created_at = EXCLUDED.created_at,
       outcome = EXCLUDED.outcome
 WHERE r.created_at < :expired_before
RETURNING true;

-- name: set_request_run
UPDATE job_requests SET scheduled_at = $4
 WHERE tenant_id = $1 AND method = $2 AND request_id = $3;

-- name: purge_requests
-- Deletes up to $2 idempotency records created before $1.
DELETE FROM job_requests
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM job_requests WHERE created_at < $1 LIMIT $2));

-- name: update_job
-- Writes job :job_id of tenant :tenant_id if it is still at version :read_version: the
-- new name, next_run_at only when :reschedule, the definition (:calendars: the
-- referenced calendars' contents), version + 1, updated_at :now; :changed_by and
-- :request_id: who and the request id (the revision). Parameters by name
-- (store._params.UpdateJob).
WITH changed AS (
    UPDATE jobs
       SET name = :name,
           next_run_at = CASE WHEN :reschedule::boolean THEN :next_run_at::timestamptz
                              ELSE next_run_at END,
           -- A changed definition may be the fix for a job the scheduler quarantined.
           dispatch_not_before = NULL,
           definition_digest = sundial_definition_digest(:schedule::jsonb, :policies::jsonb,
                                                         :calendars::jsonb),
           version = version + 1,
           updated_at = :now
     WHERE job_id = :job_id AND tenant_id = :tenant_id AND version = :read_version
    RETURNING job_id
)
UPDATE job_definitions d
   SET schedule = :schedule, target = :target, policies = :policies, payload = :payload,
       labels = :labels, description = :description, changed_by = :changed_by,
       change_request_id = :request_id, calendars = :calendars,
       calendar_keys = sundial_calendar_keys(:tenant_id, :schedule::jsonb)  -- migration 0017
  FROM changed
 WHERE d.job_id = changed.job_id
RETURNING d.job_id;

-- name: pause_job
-- Pauses job $1 of tenant $2 (when $3 is 0 or its version) with note $4 at $5 until $8
-- (NULL: until resumed; migration 0024); $6, $7: who and the request id (the revision).
WITH changed AS (
    UPDATE jobs
       SET paused = true, pause_until = $8::timestamptz, version = version + 1, updated_at = $5
     WHERE job_id = $1 AND tenant_id = $2 AND ($3::bigint = 0 OR version = $3)
    RETURNING job_id
)
UPDATE job_definitions d SET pause_note = $4, changed_by = $6, change_request_id = $7
  FROM changed
 WHERE d.job_id = changed.job_id
RETURNING d.job_id;

-- name: resume_job
-- Resumes job $1 of tenant $2 if still at version $3, note $4 at $5; a paused job gets
-- next_run_at $6 (computed from the resume instant), an unpaused one keeps its own;
-- $7, $8: who and the request id (the revision). The failure policy counts dead runs
-- in a row afresh from a resume (migration 0014).
WITH changed AS (
    UPDATE jobs
       SET paused = false,
           pause_until = NULL,
           next_run_at = CASE WHEN paused THEN $6::timestamptz ELSE next_run_at END,
           dispatch_not_before = NULL,  -- resuming means: try now, quarantine or not
           version = version + 1,
           updated_at = $5
     WHERE job_id = $1 AND tenant_id = $2 AND version = $3
    RETURNING job_id
), recount AS (
    UPDATE job_stats s
       SET consecutive_dead = 0, pause_due = false, pause_reason = NULL
      FROM changed
     WHERE s.job_id = changed.job_id AND (s.consecutive_dead > 0 OR s.pause_due)
)
UPDATE job_definitions d SET pause_note = $4, changed_by = $7, change_request_id = $8
  FROM changed
 WHERE d.job_id = changed.job_id
RETURNING d.job_id;

-- name: job_version
SELECT version FROM jobs WHERE job_id = $1 AND tenant_id = $2;

-- name: lock_job_for_delete
-- Locks job $1 of tenant $2 when $3 is 0 or its version; returns its version.
SELECT version FROM jobs
 WHERE job_id = $1 AND tenant_id = $2 AND ($3::bigint = 0 OR version = $3)
   FOR UPDATE;

-- name: cancel_runs_of_job
-- DeleteJob, DeleteJobs: unfinished runs of the jobs $1 cancelled at $2 with reason $3
-- (sundial.run.cancel, the shared SET list of sundial/run/cancel.sql).
UPDATE job_runs AS r
   SET {cancel_set}
  FROM (SELECT $2::timestamptz AS at, $3::text AS reason) AS c
 WHERE r.job_id = ANY($1::uuid[]) AND r.status IN ('pending', 'queued', 'running', 'retrying');

-- name: delete_job
DELETE FROM jobs WHERE job_id = $1 AND tenant_id = $2;

-- name: lock_job_for_runs
-- Job $1 of tenant $2, share-locked so it cannot be deleted while runs are added or
-- changed; with what run rows need (partition) and its schedule (backfill, due_at).
SELECT j.partition_id, d.schedule
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
 WHERE j.job_id = $1 AND j.tenant_id = $2
   FOR KEY SHARE OF j;

-- name: job_schedule
-- With the contents of the calendars it names (migration 0015).
SELECT sundial_dispatch_schedule(d.schedule, d.calendars) AS schedule
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
 WHERE j.job_id = $1 AND j.tenant_id = $2;

-- name: insert_runs
-- Inserts QUEUED runs of kind $5 for job $1 (tenant $2, partition $3) at the instants
-- $4, created at $6. check_at = $6 hands them to the scheduler, which publishes them.
-- Instants that already have a run are left alone (the run key is the primary key).
-- $7: each run's trace context, or NULL while tracing is off.
INSERT INTO job_runs AS r (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                           check_at, created_at, updated_at, traceparent)
SELECT $1, u.t, $2, $3, $5, 'queued', $6, $6, $6, u.traceparent
  FROM unnest($4::timestamptz[], $7::text[]) AS u(t, traceparent)
ON CONFLICT (job_id, scheduled_at) DO NOTHING
RETURNING {run_columns};

-- name: get_run
SELECT {run_columns},
       sundial_dispatch_schedule(d.schedule, d.calendars) AS schedule
  FROM job_runs r
  JOIN jobs j ON j.job_id = r.job_id
  JOIN job_definitions d ON d.job_id = r.job_id
 WHERE r.job_id = $1 AND r.scheduled_at = $2 AND j.tenant_id = $3 AND r.tenant_id = $3;

-- name: list_runs
-- A page of job $1's runs (tenant $2), newest first, before the cursor $3, in statuses
-- $4, kinds $5, scheduled in [$6, $7) (each filter only when given).
SELECT {run_columns}
  FROM job_runs r
 WHERE job_id = $1 AND tenant_id = $2
   AND ($3::timestamptz IS NULL OR scheduled_at < $3)
   AND ($4::text[] IS NULL OR status = ANY($4::text[]))
   AND ($5::text[] IS NULL OR kind = ANY($5::text[]))
   AND ($6::timestamptz IS NULL OR scheduled_at >= $6)
   AND ($7::timestamptz IS NULL OR scheduled_at < $7)
 ORDER BY scheduled_at DESC
 LIMIT $8;

-- name: count_active_runs
SELECT count(*) FROM job_runs
 WHERE job_id = $1 AND status IN ('pending', 'queued', 'running', 'retrying');

-- name: replay_run
-- ReplayRun: a DEAD or CANCELLED run back to QUEUED at $3 with a fresh retry budget
-- (attempt_base = attempt; attempt itself keeps growing: it is the fencing token).
UPDATE job_runs AS r
   SET status = 'queued',
       replay_count = replay_count + 1,
       attempt_base = attempt,
       -- Due for a fresh publish (the scheduler assigns a new dispatch sequence), and no
       -- late confirmation of an earlier publish can match it.
       dispatch_seq = 0,
       check_at = $3,
       finished_at = NULL,
       next_attempt_at = NULL,
       lease_until = NULL,
       cancel_requested = false,
       skip_reason = NULL,
       updated_at = $3
 WHERE job_id = $1 AND scheduled_at = $2 AND status IN ('dead', 'cancelled')
   -- A dead run whose DeadLetter is still in the outbox (check_at set) waits for it.
   AND NOT (status = 'dead' AND check_at IS NOT NULL)
RETURNING {run_columns};

-- name: cancel_run
-- CancelRun at $3 with reason $4, the transition sundial.run.cancel (the shared SET list
-- of sundial/run/cancel.sql).
UPDATE job_runs AS r
   SET {cancel_set}
  FROM (SELECT $3::timestamptz AS at, $4::text AS reason) AS c
 WHERE r.job_id = $1 AND r.scheduled_at = $2
   AND r.status IN ('pending', 'queued', 'running', 'retrying')
RETURNING {run_columns};

-- name: count_cancelled
UPDATE job_stats SET cancelled_count = cancelled_count + 1, updated_at = $2 WHERE job_id = $1;

-- name: insert_tenant
-- Creates tenant $1 with its first signing secret ($5, id $6) at $7; $8 max_calendars,
-- $9 max_waiting_requested_runs, $10 revisions_per_job, $11 fair_weight (NULL: the
-- operator's defaults).
WITH tenant AS (
    INSERT INTO tenants (tenant_id, name, max_jobs, max_concurrent_runs, signing_secret,
                         created_at, updated_at, max_calendars, max_waiting_requested_runs,
                         revisions_per_job, fair_weight)
    VALUES ($1, $2, $3, $4, $5, $7, $7, $8, $9, $10, $11)
    RETURNING tenant_id
)
INSERT INTO tenant_signing_secrets (secret_id, tenant_id, secret, created_at)
SELECT $6, tenant_id, $5, $7 FROM tenant;

-- name: get_tenant
SELECT tenant_id, name, max_jobs, max_concurrent_runs, created_at, updated_at,
       max_calendars, max_waiting_requested_runs, revisions_per_job, fair_weight
  FROM tenants
 WHERE tenant_id = $1;

-- name: list_tenants
SELECT tenant_id, name, max_jobs, max_concurrent_runs, created_at, updated_at,
       max_calendars, max_waiting_requested_runs, revisions_per_job, fair_weight
  FROM tenants
 WHERE tenant_id > $1
 ORDER BY tenant_id
 LIMIT $2;

-- name: tenant_secrets
-- Signing secret metadata of tenants $1, newest first.
SELECT tenant_id, secret_id, created_at, expires_at
  FROM tenant_signing_secrets
 WHERE tenant_id = ANY($1::text[])
 ORDER BY tenant_id, created_at DESC, secret_id;

-- name: update_tenant
-- Changes the fields of tenant $1 that are not NULL ($2 name, $3 max_jobs,
-- $4 max_concurrent_runs) at $5; $6 max_calendars, $7 max_waiting_requested_runs,
-- $8 revisions_per_job, $9 fair_weight likewise, 0 setting one back to the operator's
-- default (NULL).
UPDATE tenants
   SET name = coalesce($2, name),
       max_jobs = coalesce($3, max_jobs),
       max_concurrent_runs = coalesce($4, max_concurrent_runs),
       max_calendars = CASE WHEN $6::integer IS NULL THEN max_calendars
                            ELSE nullif($6::integer, 0) END,
       max_waiting_requested_runs = CASE WHEN $7::bigint IS NULL THEN max_waiting_requested_runs
                                         ELSE nullif($7::bigint, 0) END,
       revisions_per_job = CASE WHEN $8::integer IS NULL THEN revisions_per_job
                                ELSE nullif($8::integer, 0) END,
       fair_weight = CASE WHEN $9::integer IS NULL THEN fair_weight
                          ELSE nullif($9::integer, 0) END,
       updated_at = $5
 WHERE tenant_id = $1
RETURNING tenant_id;

-- name: expire_secrets
-- Rotation of tenant $1 at $2: its current secret (the newest still valid) stops at $3
-- (or earlier if it already was going to); every older one stops now, so a rotation
-- during an overlap ends that overlap and, with the new secret, at most two are valid.
UPDATE tenant_signing_secrets
   SET expires_at = CASE
           WHEN secret_id <> (SELECT secret_id FROM tenant_signing_secrets
                               WHERE tenant_id = $1 AND (expires_at IS NULL OR expires_at > $2)
                               ORDER BY created_at DESC, secret_id DESC LIMIT 1) THEN $2
           WHEN expires_at IS NULL OR expires_at > $3 THEN $3
           ELSE expires_at END
 WHERE tenant_id = $1 AND (expires_at IS NULL OR expires_at > $2);

-- name: delete_expired_secrets
-- Tenant $1's signing secrets no longer valid at $2: nothing signs with them again.
DELETE FROM tenant_signing_secrets WHERE tenant_id = $1 AND expires_at <= $2;

-- name: add_secret
WITH secret AS (
    INSERT INTO tenant_signing_secrets (secret_id, tenant_id, secret, created_at)
    VALUES ($2, $1, $3, $4)
)
UPDATE tenants SET signing_secret = $3 WHERE tenant_id = $1 RETURNING tenant_id;

-- name: insert_token
-- $9: the scopes of a TENANT token (NULL: every scope; migration 0020).
INSERT INTO api_tokens (token_id, tenant_id, role, token_hash, prefix, description,
                        created_at, expires_at, scopes)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING token_id, tenant_id, role, prefix, description, created_at, expires_at,
          last_used_at, revoked_at, scopes;

-- name: list_tokens
-- Tokens newest first after the cursor ($3, $4), of tenant $1 when given, only usable
-- ones at $2 unless $5.
SELECT token_id, tenant_id, role, prefix, description, created_at, expires_at,
       last_used_at, revoked_at, scopes
  FROM api_tokens
 WHERE ($1::text IS NULL OR tenant_id = $1)
   AND ($5::boolean OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)))
   AND ($3::timestamptz IS NULL OR (created_at, token_id) < ($3, $4::uuid))
 ORDER BY created_at DESC, token_id DESC
 LIMIT $6;

-- name: revoke_token
UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $2)
 WHERE token_id = $1
RETURNING token_id, tenant_id, role, prefix, description, created_at, expires_at,
          last_used_at, revoked_at, scopes;

-- name: oldest_due
-- The oldest next_run_at of an unpaused job due at $1: one probe of jobs_due_idx per
-- partition instead of a scan of every due job.
SELECT min(due.next_run_at)
  FROM generate_series(0, 255) AS p(partition_id)
 CROSS JOIN LATERAL (
        SELECT next_run_at
          FROM jobs
         WHERE jobs.partition_id = p.partition_id AND NOT paused AND next_run_at <= $1
         ORDER BY next_run_at
         LIMIT 1
       ) AS due;

-- name: get_egress_policy
-- Tenant $1's own egress policy (NULL: the operator's default applies) and when it was
-- last set; no row when the tenant does not exist.
SELECT egress_policy::text AS egress_policy, egress_policy_updated_at
  FROM tenants
 WHERE tenant_id = $1;

-- name: set_egress_policy
-- Sets tenant $1's egress policy to the document $2 (NULL: back to the default) at $3.
UPDATE tenants
   SET egress_policy = $2::text::jsonb, egress_policy_updated_at = $3
 WHERE tenant_id = $1
RETURNING egress_policy::text AS egress_policy, egress_policy_updated_at;

-- name: list_job_revisions
-- Job $1's revisions (tenant $2), newest first, versions below $3 when given, at most $4.
SELECT version, name, paused, schedule, target, policies, payload, labels, description,
       pause_note, changed_fields, changed_by, request_id, created_at
  FROM job_revisions
 WHERE job_id = $1 AND tenant_id = $2 AND ($3::bigint IS NULL OR version < $3)
 ORDER BY version DESC
 LIMIT $4;

-- name: list_audit_events
-- Tenant $1's audit events, newest first, ids below $2 when given, at most $3.
SELECT event_id, at, actor, method, resource, code, request_id
  FROM audit_events
 WHERE tenant_id = $1 AND ($2::bigint IS NULL OR event_id < $2)
 ORDER BY event_id DESC
 LIMIT $3;

-- name: insert_audit_event
-- One write call: tenant $1 (NULL: none), at $2, by $3, method $4, resource $5, code $6,
-- request id $7.
INSERT INTO audit_events (tenant_id, at, actor, method, resource, code, request_id)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: slo_run_counts
-- A job's SLO counts per window (docs/design.md section 11): job $1 of tenant $2, the
-- windows' starts $3 (one row per window, in that order; distinct), now $4, the job's
-- lateness threshold $5 and jitter bound $6, $7 the earliest start. Scheduled runs only.
-- A run started within $5 of its nominal time is on time whatever its jitter, one
-- started (or still waiting) more than $5 + $6 after it is late; those in between need
-- their own jitter, which the API computes: the row of the longest window lists them
-- (unsure_at, unsure_started, unsure_throttled; empty without a jitter). A late start
-- of a run that waited for its rate-limit key (job_runs.throttled) counts as throttled,
-- not late. One index range scan of the primary key per day's partition of the longest
-- window.
WITH runs AS (
    SELECT scheduled_at, started_at, status, throttled,
           ($6::interval > interval '0' AND (
               (started_at > scheduled_at + $5::interval
                AND started_at <= scheduled_at + $5::interval + $6::interval)
            OR (started_at IS NULL AND status IN ('pending', 'queued')
                AND $4 > scheduled_at + $5::interval
                AND $4 <= scheduled_at + $5::interval + $6::interval))) AS unsure
      FROM job_runs
     WHERE job_id = $1 AND tenant_id = $2 AND kind = 'scheduled'
       AND scheduled_at >= $7 AND scheduled_at <= $4
)
SELECT w.i,
       count(r.scheduled_at) AS runs,
       count(*) FILTER (WHERE r.status = 'skipped') AS skipped,
       count(*) FILTER (WHERE r.status = 'dead') AS failed,
       count(*) FILTER (WHERE r.started_at <= r.scheduled_at + $5::interval) AS on_time,
       count(*) FILTER (
           WHERE (r.started_at > r.scheduled_at + $5::interval + $6::interval
                  OR (r.started_at IS NULL AND r.status IN ('pending', 'queued')
                      AND $4 > r.scheduled_at + $5::interval + $6::interval))
             AND NOT r.throttled) AS late,
       count(*) FILTER (
           WHERE r.started_at > r.scheduled_at + $5::interval + $6::interval
             AND r.throttled) AS throttled,
       coalesce(array_agg(r.scheduled_at) FILTER (WHERE r.unsure AND w.start = $7),
                '{}') AS unsure_at,
       coalesce(array_agg(r.started_at) FILTER (WHERE r.unsure AND w.start = $7),
                '{}') AS unsure_started,
       coalesce(array_agg(r.throttled) FILTER (WHERE r.unsure AND w.start = $7),
                '{}') AS unsure_throttled
  FROM unnest($3::timestamptz[]) WITH ORDINALITY AS w(start, i)
  LEFT JOIN runs r ON r.scheduled_at >= w.start
 GROUP BY w.i
 ORDER BY w.i;

-- name: slo_misfires
-- Job $1's skipped misfires whose nominal span meets [$2, $3] (migration 0016).
SELECT first_at, last_at, skipped
  FROM job_misfires
 WHERE job_id = $1 AND last_at >= $2 AND first_at <= $3
 ORDER BY first_at;

-- --- calendars (migration 0015) ----------------------------------------------------------

-- name: get_calendar
SELECT {calendar_columns}
  FROM calendars WHERE tenant_id = $1 AND name = $2;

-- name: calendars_named
-- Tenant $1's calendars among the names $2.
SELECT {calendar_columns}
  FROM calendars WHERE tenant_id = $1 AND name = ANY($2::text[]);

-- name: lock_calendars
-- Tenant $1's calendars among the names $2, locked against UpdateCalendar and
-- DeleteCalendar until the commit: a job write takes it first (lock order: calendars,
-- then jobs), so the versions it computed with are the ones it commits with.
SELECT name, version FROM calendars
 WHERE tenant_id = $1 AND name = ANY($2::text[])
 ORDER BY name
   FOR SHARE;

-- name: list_calendars
-- A page of tenant $1's calendars by name after $2.
SELECT {calendar_columns}
  FROM calendars WHERE tenant_id = $1 AND name > $2 ORDER BY name LIMIT $3;

-- name: insert_calendar
INSERT INTO calendars (tenant_id, name, description, kind, dates, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $6);

-- name: lock_calendar
-- Tenant $1's calendar $2, locked for an update or delete.
SELECT {calendar_columns}
  FROM calendars WHERE tenant_id = $1 AND name = $2 FOR UPDATE;

-- name: update_calendar
UPDATE calendars
   SET description = $3, kind = $4, dates = $5, version = version + 1, updated_at = $6
 WHERE tenant_id = $1 AND name = $2
RETURNING {calendar_columns};

-- name: delete_calendar
DELETE FROM calendars WHERE tenant_id = $1 AND name = $2;

-- name: calendar_jobs
-- Up to $3 jobs of tenant $1 whose schedule names calendar $2, by job id: the partial GIN
-- index of migration 0017 (its predicate repeated) holds tenant-qualified names, so the
-- probe reads this tenant's jobs naming this calendar and no other tenant's.
SELECT j.job_id, coalesce(j.client_job_id, j.job_id::text) AS shown
  FROM job_definitions d
  JOIN jobs j ON j.job_id = d.job_id
 WHERE d.calendar_keys IS NOT NULL
   AND d.calendar_keys @> ARRAY[sundial_calendar_key($1, $2)]
   AND j.tenant_id = $1
 ORDER BY j.job_id
 LIMIT $3;

-- name: lock_calendar_jobs
-- The jobs of tenant $1 whose schedule names calendar $2, locked (by job id), with what
-- recomputing their next fire time needs (the index probe of calendar_jobs).
SELECT j.job_id, j.next_run_at, j.fired_count, j.last_fire_at, d.schedule, d.calendars
  FROM job_definitions d
  JOIN jobs j ON j.job_id = d.job_id
 WHERE d.calendar_keys IS NOT NULL
   AND d.calendar_keys @> ARRAY[sundial_calendar_key($1, $2)]
   AND j.tenant_id = $1
 ORDER BY j.job_id
   FOR UPDATE OF j, d;

-- name: reschedule_calendar_jobs
-- Jobs $1 get the calendar contents $2 (JSON text) and next_run_at $3 (their digest follows: the
-- scheduler reads the new document on its next claim). Neither version nor revision
-- changes: the definition the tenant wrote is the same.
WITH defs AS (
    UPDATE job_definitions d
       SET calendars = u.calendars::jsonb
      FROM unnest($1::uuid[], $2::text[]) AS u(job_id, calendars)
     WHERE d.job_id = u.job_id
    RETURNING d.job_id, d.schedule, d.policies, d.calendars
)
UPDATE jobs j
   SET definition_digest = sundial_definition_digest(defs.schedule, defs.policies, defs.calendars),
       next_run_at = u.next_run_at,
       dispatch_not_before = NULL
  FROM defs
  JOIN unnest($1::uuid[], $3::timestamptz[]) AS u(job_id, next_run_at) ON u.job_id = defs.job_id
 WHERE j.job_id = defs.job_id;

-- --- flow control (migration 0019, docs/design.md section 7 "Flow control") ------------

-- fragment: flow_limit_state
-- Follows a CTE "page" (flow_limits rows of tenant $1): each limit with its state. The
-- waiting runs of a key are its run_waits rows (the rate key the dispatcher resolved, or
-- the job's concurrency key) and, for a concurrency key, its runs published and not
-- leased yet (held at lease by the key's max_running, or not taken yet); its running
-- runs are those of the jobs naming it as their concurrency or rate-limit key (a job
-- whose rate key is its target's origin names none: the origin is resolved at
-- dispatch). One pass over the tenant's waiting runs and one over its runs in flight
-- (job_runs_tenant_inflight_idx), each grouped by key before the page's keys pick.
waits AS MATERIALIZED (
    SELECT w.rate_key, d.policies->'flow'->>'concurrency_key' AS concurrency_key,
           count(*) AS runs
      FROM run_waits w
      JOIN job_definitions d ON d.job_id = w.job_id
     WHERE w.tenant_id = $1
     GROUP BY 1, 2
), flights AS MATERIALIZED (
    SELECT r.status, d.policies->'flow'->>'rate_limit_key' AS rate_key,
           d.policies->'flow'->>'concurrency_key' AS concurrency_key, count(*) AS runs
      FROM job_runs r
      JOIN job_definitions d ON d.job_id = r.job_id
     WHERE r.tenant_id = $1
       AND (r.status = 'running' OR (r.status = 'queued' AND r.dispatch_seq > 0))
     GROUP BY 1, 2, 3
)
SELECT p.key, p.rate_per_s, p.burst, p.max_running, p.tokens, p.refilled_at,
       p.blocked_until, p.created_at, p.updated_at,
       (coalesce((SELECT sum(w.runs) FROM waits w
                   WHERE w.rate_key = p.key OR w.concurrency_key = p.key), 0)
      + coalesce((SELECT sum(f.runs) FROM flights f
                   WHERE f.status = 'queued' AND f.concurrency_key = p.key), 0)
       )::bigint AS waiting_runs,
       coalesce((SELECT sum(f.runs) FROM flights f
                  WHERE f.status = 'running'
                    AND (f.concurrency_key = p.key OR f.rate_key = p.key)), 0
       )::bigint AS running_runs
  FROM page p
 ORDER BY p.key COLLATE "C"

-- name: list_flow_limits
-- A page of tenant $1's limits by key (byte order) after $2, $3 rows, with their state.
WITH page AS (
    SELECT * FROM flow_limits
     WHERE tenant_id = $1 AND key COLLATE "C" > $2
     ORDER BY key COLLATE "C"
     LIMIT $3
), {flow_limit_state};

-- name: get_flow_limit
-- Tenant $1's limit of key $2 with its state.
WITH page AS (
    SELECT * FROM flow_limits WHERE tenant_id = $1 AND key = $2
), {flow_limit_state};

-- name: count_flow_limits
-- Tenant $1's limits, and whether key $2 is among them; run after lock_tenant_row (held
-- until the commit), so concurrent SetFlowLimit calls of new keys cannot pass the quota.
SELECT count(*) AS limits, coalesce(bool_or(key = $2), false) AS known
  FROM flow_limits
 WHERE tenant_id = $1;

-- name: set_flow_limit
-- Tenant $1's limits of key $2 at $6: rate $3 per second, bucket $4, max running $5.
-- The bucket starts full (tokens = its size, refilled at $6) when the key is new or its
-- rate or size changed; otherwise the schedulers' bucket and a target's Retry-After
-- (blocked_until) stay as they are.
INSERT INTO flow_limits AS f (tenant_id, key, rate_per_s, burst, max_running, tokens,
                              refilled_at, created_at, updated_at)
VALUES ($1, $2, $3, $4::integer, $5, $4::integer, $6, $6, $6)
ON CONFLICT (tenant_id, key) DO UPDATE
   SET rate_per_s = EXCLUDED.rate_per_s,
       burst = EXCLUDED.burst,
       max_running = EXCLUDED.max_running,
       tokens = CASE WHEN (f.rate_per_s, f.burst) = (EXCLUDED.rate_per_s, EXCLUDED.burst)
                     THEN f.tokens ELSE EXCLUDED.tokens END,
       refilled_at = CASE WHEN (f.rate_per_s, f.burst) = (EXCLUDED.rate_per_s, EXCLUDED.burst)
                          THEN f.refilled_at ELSE EXCLUDED.refilled_at END,
       updated_at = EXCLUDED.updated_at;

-- name: delete_flow_limit
-- Tenant $1's limit of key $2; returns the key when there was one.
DELETE FROM flow_limits WHERE tenant_id = $1 AND key = $2 RETURNING key;

-- name: count_notification_channels
-- Tenant $1's channels, counted after locking its tenants row (FOR UPDATE, held until
-- the create's commit) so that concurrent creates cannot both pass the channel limit:
-- the count runs after the lock is granted, in its own statement's snapshot.
SELECT count(*) FROM notification_channels WHERE tenant_id = $1;

-- name: lock_tenant_row
-- Tenant $1's row, locked until the transaction ends: writes that count the tenant's
-- rows against a quota (channels, calendars) or rotate its secrets go in turn.
SELECT 1 FROM tenants WHERE tenant_id = $1 FOR UPDATE;

-- name: tenant_quota_overrides
-- Tenant $1's own bounds (NULL: the operator's default), its row locked until the
-- transaction ends: writes that count the tenant's rows against them go in turn.
SELECT max_calendars, max_waiting_requested_runs FROM tenants WHERE tenant_id = $1 FOR UPDATE;

-- name: count_calendars
SELECT count(*) FROM calendars WHERE tenant_id = $1;

-- name: count_waiting_requested_runs
-- Tenant $1's runs made by TriggerJob or BackfillJob that have not started yet: those
-- not in flight (job_runs_tenant_status_idx, its predicate repeated) and those queued and
-- published (job_runs_tenant_inflight_idx).
SELECT (SELECT count(*) FROM job_runs
         WHERE tenant_id = $1 AND kind IN ('manual', 'backfill')
           AND status IN ('pending', 'queued', 'retrying')
           AND status <> 'running' AND (status <> 'queued' OR dispatch_seq <= 0))
     + (SELECT count(*) FROM job_runs
         WHERE tenant_id = $1 AND kind IN ('manual', 'backfill')
           AND (status = 'running' OR (status = 'queued' AND dispatch_seq > 0))
           AND status = 'queued');

-- name: purge_old_revisions
-- Up to $3 retired revisions (migration 0028): superseded ones created before $1, and
-- those of a deleted job created before $2. Each range of job_revisions_retired_idx is
-- read as far as it deletes; a live job's newest revision is never in it.
DELETE FROM job_revisions
 WHERE ctid = ANY (ARRAY(
         (SELECT ctid FROM job_revisions WHERE retired = 2 AND created_at < $2 LIMIT $3)
         UNION ALL
         (SELECT ctid FROM job_revisions WHERE retired = 1 AND created_at < $1 LIMIT $3)
         LIMIT $3));

-- name: purge_old_audit_events
-- Audit events older than $1, at most $2 of them (audit_events_at_idx: read as far as
-- it deletes).
DELETE FROM audit_events
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM audit_events WHERE at < $1 LIMIT $2));

-- name: create_notification_channel
-- A tenant's notification channel (migration 0014, docs/design.md section 12).
INSERT INTO notification_channels (channel_id, tenant_id, display_name, target, event_kinds,
                                   digest_window_s, version, created_at, updated_at)
VALUES ($1, $2, $3, $4::jsonb, $5::text[], $6, 1, $7, $7)
RETURNING channel_id, display_name, target::text AS target, event_kinds, digest_window_s,
          version, created_at, updated_at;

-- name: get_notification_channel
SELECT channel_id, display_name, target::text AS target, event_kinds, digest_window_s,
       version, created_at, updated_at
  FROM notification_channels
 WHERE channel_id = $1 AND tenant_id = $2;

-- name: list_notification_channels
-- A page of tenant $1's channels by display_name after $2 (NULL: from the start), $3 rows.
SELECT channel_id, display_name, target::text AS target, event_kinds, digest_window_s,
       version, created_at, updated_at
  FROM notification_channels
 WHERE tenant_id = $1 AND ($2::text IS NULL OR display_name > $2::text COLLATE "C")
 ORDER BY display_name
 LIMIT $3;

-- name: update_notification_channel
-- Channel $1 of tenant $2 when $3 is 0 or its version: the new values $4-$7 at $8.
UPDATE notification_channels
   SET display_name = $4, target = $5::jsonb, event_kinds = $6::text[], digest_window_s = $7,
       version = version + 1, updated_at = $8
 WHERE channel_id = $1 AND tenant_id = $2 AND ($3::bigint = 0 OR version = $3)
RETURNING channel_id, display_name, target::text AS target, event_kinds, digest_window_s,
          version, created_at, updated_at;

-- name: delete_notification_channel
-- Channel $1 of tenant $2 and what it had waiting: its events, and its notifications not
-- delivered yet (failed, 'channel deleted', at $3).
WITH gone AS (
    DELETE FROM notification_channels WHERE channel_id = $1 AND tenant_id = $2
    RETURNING channel_id
), events AS (
    DELETE FROM notification_events e USING gone WHERE e.channel_id = gone.channel_id
), dropped AS (
    UPDATE notifications n
       SET state = 'failed', last_error = 'channel deleted', finished_at = $3
      FROM gone
     WHERE n.channel_id = gone.channel_id AND n.state = 'pending'
)
SELECT count(*) FROM gone;

-- name: lock_due_notification_events
-- The outbox events to turn into notifications at $1, fairly across channels: the $3
-- channels whose first waiting event is due, oldest first (one index probe per channel,
-- however long any channel's backlog), and of each at most its first $4 events (a digest
-- channel: one notification) or $5 (a channel without a window: one notification each),
-- at most $2 in all. A digest channel's events are due when the window after its first
-- waiting one ended, and then its later ones go with it. SKIP LOCKED: notifiers on
-- several API replicas take disjoint events.
WITH due_channels AS (
    SELECT c.channel_id, c.digest_window_s > 0 AS digest
      FROM notification_channels c
     CROSS JOIN LATERAL (SELECT e.due_at FROM notification_events e
                          WHERE e.channel_id = c.channel_id
                          ORDER BY e.event_id LIMIT 1) AS first
     WHERE first.due_at <= $1
     ORDER BY first.due_at
     LIMIT $3
)
SELECT e.event_id, dc.channel_id, e.tenant_id, e.kind, e.detail::text AS detail,
       e.occurred_at, dc.digest
  FROM due_channels dc
 CROSS JOIN LATERAL (SELECT e.event_id, e.tenant_id, e.kind, e.detail, e.occurred_at
                       FROM notification_events e
                      WHERE e.channel_id = dc.channel_id
                      ORDER BY e.event_id
                      LIMIT CASE WHEN dc.digest THEN $4::int ELSE $5::int END
                        FOR UPDATE SKIP LOCKED) AS e
 LIMIT $2;

-- name: make_notifications
-- The notifications made from events locked by lock_due_notification_events ($7: those
-- events, deleted), due at $6.
WITH made AS (
    INSERT INTO notifications (notification_id, channel_id, tenant_id, body, event_count,
                               next_attempt_at, created_at)
    SELECT u.notification_id, u.channel_id, u.tenant_id, u.body, u.event_count, $6, $6
      FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::bytea[], $5::int[])
           AS u(notification_id, channel_id, tenant_id, body, event_count)
    RETURNING 1
), consumed AS (
    DELETE FROM notification_events WHERE event_id = ANY($7::bigint[])
)
SELECT count(*) FROM made;

-- name: claim_notifications
-- Up to $2 notifications due at $1, claimed until $3 (a notifier that dies while sending
-- leaves them due again then: delivery is at least once), each with its attempt number,
-- its channel's target, and its tenant's egress policy and valid signing secrets (newest
-- first). A notification whose channel is gone has no target. Fair across channels: of
-- the $5 oldest and the $5 newest due (two scans of the due index: a notification that
-- just came due is looked at however long another channel's backlog is), at most $4
-- per channel, every channel's first before any channel's second (a channel with a
-- backlog or a hanging target takes at most $4 of the batch). And across tenants, when
-- $8 is not NULL: at most $8 of a tenant ($7[i] of tenant $6[i], the room its sends in
-- flight leave it), every tenant's first before any tenant's second.
-- The candidates are twice $2 so that a replica claiming at the same moment, skipping
-- the rows this one locked, still finds work.
WITH oldest AS (
    (SELECT notification_id, channel_id, tenant_id, next_attempt_at
       FROM notifications
      WHERE state = 'pending' AND next_attempt_at <= $1
      ORDER BY next_attempt_at
      LIMIT $5)
    UNION
    (SELECT notification_id, channel_id, tenant_id, next_attempt_at
       FROM notifications
      WHERE state = 'pending' AND next_attempt_at <= $1
      ORDER BY next_attempt_at DESC
      LIMIT $5)
), ranked AS (
    SELECT notification_id, tenant_id, next_attempt_at,
           row_number() OVER (PARTITION BY channel_id ORDER BY next_attempt_at) AS nth
      FROM oldest
), per_tenant AS (
    SELECT r.notification_id, r.nth, r.next_attempt_at,
           row_number() OVER (PARTITION BY r.tenant_id ORDER BY r.nth, r.next_attempt_at)
               AS tnth,
           coalesce(q.room, $8::int) AS room
      FROM ranked r
      LEFT JOIN unnest($6::text[], $7::int[]) AS q(tenant_id, room)
             ON q.tenant_id = r.tenant_id
     WHERE r.nth <= $4
), candidates AS (
    SELECT notification_id, tnth, nth, next_attempt_at
      FROM per_tenant
     WHERE room IS NULL OR tnth <= room
     ORDER BY tnth, nth, next_attempt_at
     LIMIT 2 * $2::int
), due AS (
    SELECT n.notification_id
      FROM notifications n
      JOIN candidates c ON c.notification_id = n.notification_id
     WHERE n.state = 'pending' AND n.next_attempt_at <= $1
     ORDER BY c.tnth, c.nth, c.next_attempt_at
     LIMIT $2
       FOR UPDATE OF n SKIP LOCKED
), claimed AS (
    UPDATE notifications n
       SET attempt = n.attempt + 1, next_attempt_at = $3
      FROM due
     WHERE n.notification_id = due.notification_id
    RETURNING n.notification_id, n.channel_id, n.tenant_id, n.body, n.attempt
)
SELECT cl.notification_id, cl.channel_id, cl.tenant_id, cl.body, cl.attempt,
       c.target::text AS target, t.egress_policy::text AS egress_policy,
       (SELECT array_agg(k.secret ORDER BY k.created_at DESC)
          FROM tenant_signing_secrets k
         WHERE k.tenant_id = cl.tenant_id
           AND (k.expires_at IS NULL OR k.expires_at > $1)) AS signing_secrets
  FROM claimed cl
  LEFT JOIN notification_channels c ON c.channel_id = cl.channel_id
  LEFT JOIN tenants t ON t.tenant_id = cl.tenant_id;

-- name: finish_notifications
-- The outcomes of claimed deliveries, each fenced on the attempt it claimed ($2) and on
-- being still pending: a notifier whose claim ended (and another claimed the
-- notification again) changes nothing. State $3 ('delivered', 'failed' or 'pending' to
-- retry at $4), error $5, at $6.
UPDATE notifications n
   SET state = u.state, next_attempt_at = coalesce(u.next_attempt_at, n.next_attempt_at),
       last_error = u.error,
       finished_at = CASE WHEN u.state = 'pending' THEN NULL ELSE $6::timestamptz END
  FROM unnest($1::uuid[], $2::int[], $3::text[], $4::timestamptz[], $5::text[])
       AS u(notification_id, attempt, state, next_attempt_at, error)
 WHERE n.notification_id = u.notification_id AND n.attempt = u.attempt
   AND n.state = 'pending';

-- name: purge_notifications
-- Up to $2 notifications delivered or given up before $1; the count deleted.
WITH gone AS (
    DELETE FROM notifications
     WHERE notification_id IN (SELECT notification_id FROM notifications
                                WHERE state <> 'pending' AND finished_at < $1
                                ORDER BY finished_at LIMIT $2)
    RETURNING 1
)
SELECT count(*) FROM gone;

-- --- tenant secrets (migration 0021) ----------------------------------------------------
-- fragment: secret_columns
-- A secret as secret_from_row reads it (never its sealed value).
name, description, version, created_at, updated_at

-- name: insert_secret
-- Tenant $1's secret $2 (description $3), sealed under key $4 ($5 wrapped data key,
-- $6 nonce, $7 ciphertext), at $8.
INSERT INTO tenant_secrets (tenant_id, name, description, kek_id, wrapped_key, nonce,
                            ciphertext, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
RETURNING {secret_columns};

-- name: count_secrets
SELECT count(*) FROM tenant_secrets WHERE tenant_id = $1;

-- name: lock_secret
-- Tenant $1's secret $2, locked for an update or delete.
SELECT {secret_columns} FROM tenant_secrets WHERE tenant_id = $1 AND name = $2 FOR UPDATE;

-- name: update_secret
-- As insert_secret, a new value under a new data key.
UPDATE tenant_secrets
   SET description = $3, kek_id = $4, wrapped_key = $5, nonce = $6, ciphertext = $7,
       version = version + 1, updated_at = $8
 WHERE tenant_id = $1 AND name = $2
RETURNING {secret_columns};

-- name: list_secrets
-- Tenant $1's secrets by name after $2, at most $3.
SELECT {secret_columns} FROM tenant_secrets
 WHERE tenant_id = $1 AND name > $2
 ORDER BY name
 LIMIT $3;

-- name: delete_secret
DELETE FROM tenant_secrets WHERE tenant_id = $1 AND name = $2;

-- name: existing_secrets
-- Which of the names $2 tenant $1 has.
SELECT name FROM tenant_secrets WHERE tenant_id = $1 AND name = ANY($2::text[]);

-- name: secret_referrers
-- Up to $3 jobs (client id, else uid) and notification channels ('channel <name>') of
-- tenant $1 whose target holds the reference $2 ('${secret:<name>}'). A scan of the
-- tenant's definitions: DeleteSecret is rare, and a tenant's jobs are bounded (max_jobs).
(SELECT coalesce(j.client_job_id, j.job_id::text) AS shown
   FROM jobs j JOIN job_definitions d USING (job_id)
  WHERE j.tenant_id = $1 AND strpos(d.target::text, $2) > 0
  ORDER BY 1 LIMIT $3)
UNION ALL
(SELECT 'channel ' || display_name
   FROM notification_channels
  WHERE tenant_id = $1 AND strpos(target::text, $2) > 0
  ORDER BY 1 LIMIT $3);

-- name: sealed_secrets
-- The sealed values of (tenant, name) pairs $1, $2 (the notifier's deliveries).
SELECT s.tenant_id, s.name, s.kek_id, s.wrapped_key, s.nonce, s.ciphertext
  FROM tenant_secrets s
  JOIN unnest($1::text[], $2::text[]) AS wanted (tenant_id, name)
    ON s.tenant_id = wanted.tenant_id AND s.name = wanted.name;

-- name: secrets_to_rewrap
-- Up to $2 secrets whose data key is not wrapped by key $1, locked (SKIP LOCKED: two
-- calls at once take disjoint rows).
SELECT tenant_id, name, kek_id, wrapped_key, nonce, ciphertext
  FROM tenant_secrets
 WHERE kek_id <> $1
 LIMIT $2
   FOR UPDATE SKIP LOCKED;

-- name: rewrap_secret
UPDATE tenant_secrets SET kek_id = $3, wrapped_key = $4 WHERE tenant_id = $1 AND name = $2;

-- name: count_to_rewrap
SELECT count(*) FROM tenant_secrets WHERE kek_id <> $1;

-- name: insert_identity_key
-- A new identity-token signing key (migration 0023): $1 kid, $2 algorithm, $3 public
-- JWK, $4 kek_id, $5 wrapped_key, $6 nonce, $7 ciphertext, $8 now; with $9 true only
-- when no key signs yet (the API's start: every replica tries, one inserts). Returns
-- the kid when inserted.
INSERT INTO identity_keys
    (kid, algorithm, public_jwk, kek_id, wrapped_key, nonce, ciphertext, created_at)
SELECT $1, $2, $3::jsonb, $4, $5, $6, $7, $8
 WHERE NOT $9::boolean
    OR (pg_try_advisory_xact_lock(hashtext('sundial.identity_keys'))
        AND NOT EXISTS (SELECT 1 FROM identity_keys
                         WHERE retire_at IS NULL OR retire_at > $8))
RETURNING kid;

-- name: retire_identity_keys
-- A rotation: every key other than $1 (the new one) that is not retired yet stops
-- signing now and stays published until $2 (now + the overlap); one that retires
-- earlier keeps its time. Keys retired more than a day before $3 (now) are deleted.
WITH retired AS (
    UPDATE identity_keys
       SET retire_at = least(coalesce(retire_at, $2), $2)
     WHERE kid <> $1 AND (retire_at IS NULL OR retire_at > $3)
    RETURNING kid
)
DELETE FROM identity_keys
 WHERE retire_at < $3 - interval '1 day' AND kid NOT IN (SELECT kid FROM retired);

-- name: identity_keys_to_rewrap
-- Up to $2 identity keys that may still sign (not retired: a retired key never signs
-- again, so its private half is never opened) whose data key is not wrapped by key $1,
-- locked (SKIP LOCKED: two calls at once take disjoint rows).
SELECT kid, kek_id, wrapped_key, nonce, ciphertext
  FROM identity_keys
 WHERE kek_id <> $1 AND retire_at IS NULL
 LIMIT $2
   FOR UPDATE SKIP LOCKED;

-- name: rewrap_identity_key
UPDATE identity_keys SET kek_id = $2, wrapped_key = $3 WHERE kid = $1;

-- name: count_identity_keys_to_rewrap
SELECT count(*) FROM identity_keys WHERE kek_id <> $1 AND retire_at IS NULL;

-- name: list_identity_keys
-- The stored identity keys at $1 (now), newest first, at most $2: whether each is
-- published and which one signs (as the scheduler's signing_identity_key chooses).
WITH signing AS (
    SELECT kid
      FROM identity_keys
     WHERE retire_at IS NULL OR retire_at > $1
     ORDER BY (retire_at IS NULL) DESC, created_at DESC, kid
     LIMIT 1
)
SELECT k.kid, k.algorithm, k.kek_id, k.created_at, k.retire_at,
       (k.retire_at IS NULL OR k.retire_at > $1) AS published,
       k.kid IN (SELECT kid FROM signing) AS signing
  FROM identity_keys k
 ORDER BY k.created_at DESC, k.kid
 LIMIT $2;

-- name: published_identity_keys
-- The public JWKs of the keys a token may still be signed with at $1 (now): not
-- retired, or retired after $1; newest first.
SELECT public_jwk
  FROM identity_keys
 WHERE retire_at IS NULL OR retire_at > $1
 ORDER BY created_at DESC, kid;

-- --- operating many jobs (migration 0024, docs/design.md section 13) ------------------

-- name: custom_plans
-- For the rest of the transaction, plan each statement with its parameters' values: the
-- filters of job_filters and list_tenant_runs are optional (`$n IS NULL OR ...`), and a
-- plan cached for any values (PostgreSQL's generic plan, chosen after five runs of a
-- prepared statement) cannot use the label index for them, which a 1M-job count showed
-- as a scan of every definition.
SET LOCAL plan_cache_mode = force_custom_plan;

-- name: count_jobs
-- Tenant $1's jobs matching the filters $2-$7 (job_filters).
SELECT count(*)
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
 WHERE j.tenant_id = $1
   AND {job_filters};

-- name: select_jobs
-- Up to $8 of tenant $1's jobs matching the filters $2-$7 (job_filters; $7 is the state
-- the action changes: a pause takes the unpaused ones), by name: what a bulk action acts
-- on, with what it needs (version, stored schedule and calendars for a resume's next fire
-- time; shown: the id the job is named by).
SELECT j.job_id, coalesce(j.client_job_id, j.job_id::text) AS shown, j.name, j.version,
       j.fired_count, j.last_fire_at, d.schedule::text AS schedule,
       d.calendars::text AS calendars  -- as text: decoded once per distinct document
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
 WHERE j.tenant_id = $1
   AND {job_filters}
 ORDER BY j.name
 LIMIT $8;

-- name: pause_jobs
-- PauseJobs: tenant $2's jobs $1 not paused yet, locked in job id order (concurrent bulk
-- actions on overlapping jobs wait rather than deadlock), paused with note $3 until $4
-- (NULL: until resumed) at $5; $6, $7: who and the request id (each job's revision, by
-- the trigger of migration 0012). Returns the jobs paused, by name.
WITH locked AS (
    SELECT job_id FROM jobs
     WHERE job_id = ANY($1::uuid[]) AND tenant_id = $2 AND NOT paused
     ORDER BY job_id
       FOR UPDATE
), changed AS (
    UPDATE jobs j
       SET paused = true, pause_until = $4::timestamptz, version = j.version + 1,
           updated_at = $5
      FROM locked
     WHERE j.job_id = locked.job_id
    RETURNING j.job_id, coalesce(j.client_job_id, j.job_id::text) AS shown, j.name
), noted AS (
    UPDATE job_definitions d SET pause_note = $3, changed_by = $6, change_request_id = $7
      FROM changed
     WHERE d.job_id = changed.job_id
)
SELECT shown FROM changed ORDER BY name;

-- name: resume_jobs
-- ResumeJobs and the timed pause's resumer: tenant $1's jobs $2 still paused at the
-- versions $3 they were read at, resumed at $5 with next_run_at $4 (computed from $5),
-- note $6 (NULL: each keeps its own); $7, $8: who and the request id (the revisions).
-- The failure policy counts dead runs in a row afresh from a resume, as resume_job does.
-- Returns the jobs resumed, by name.
WITH input AS (
    SELECT u.job_id, u.version, u.next_run_at
      FROM unnest($2::uuid[], $3::bigint[], $4::timestamptz[]) AS u(job_id, version, next_run_at)
), locked AS (
    SELECT j.job_id FROM jobs j JOIN input i ON i.job_id = j.job_id
     WHERE j.tenant_id = $1 AND j.paused AND j.version = i.version
     ORDER BY j.job_id
       FOR UPDATE OF j
), changed AS (
    UPDATE jobs j
       SET paused = false, pause_until = NULL, next_run_at = i.next_run_at,
           dispatch_not_before = NULL, version = j.version + 1, updated_at = $5
      FROM locked JOIN input i ON i.job_id = locked.job_id
     WHERE j.job_id = locked.job_id
    RETURNING j.job_id, coalesce(j.client_job_id, j.job_id::text) AS shown, j.name
), recount AS (
    UPDATE job_stats s
       SET consecutive_dead = 0, pause_due = false, pause_reason = NULL
      FROM changed
     WHERE s.job_id = changed.job_id AND (s.consecutive_dead > 0 OR s.pause_due)
), noted AS (
    UPDATE job_definitions d
       SET pause_note = coalesce($6::text, d.pause_note), changed_by = $7,
           change_request_id = $8
      FROM changed
     WHERE d.job_id = changed.job_id
)
SELECT shown FROM changed ORDER BY name;

-- name: lock_jobs_for_delete
-- DeleteJobs: tenant $2's jobs $1, locked in job id order; the ids they are shown by.
SELECT job_id, coalesce(client_job_id, job_id::text) AS shown, name
  FROM jobs
 WHERE job_id = ANY($1::uuid[]) AND tenant_id = $2
 ORDER BY job_id
   FOR UPDATE;

-- name: delete_jobs
-- The jobs $1 of tenant $2 (locked by lock_jobs_for_delete), their quota slots released
-- (the tenant row last, as DeleteJob locks it).
WITH gone AS (
    DELETE FROM jobs WHERE job_id = ANY($1::uuid[]) AND tenant_id = $2 RETURNING job_id
)
UPDATE tenants SET job_count = greatest(job_count - (SELECT count(*) FROM gone), 0)
 WHERE tenant_id = $2;

-- name: lock_jobs_for_runs
-- TriggerJobs: tenant $2's jobs $1 share-locked (as lock_job_for_runs), with their
-- partitions.
SELECT job_id, partition_id
  FROM jobs
 WHERE job_id = ANY($1::uuid[]) AND tenant_id = $2
 ORDER BY job_id
   FOR KEY SHARE;

-- name: insert_manual_runs
-- TriggerJobs: one QUEUED MANUAL run per job $1 (partition $3) of tenant $2 at the
-- instants $4, created at $5 (check_at = $5 hands them to the scheduler). An instant
-- another run has already is left out (the caller moves it by 1 µs and tries again).
INSERT INTO job_runs AS r (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                           check_at, created_at, updated_at)
SELECT u.job_id, u.at, $2, u.partition_id, 'manual', 'queued', $5, $5, $5
  FROM unnest($1::uuid[], $3::smallint[], $4::timestamptz[]) AS u(job_id, partition_id, at)
ON CONFLICT (job_id, scheduled_at) DO NOTHING
RETURNING r.job_id, r.scheduled_at;

-- name: insert_audit_events
-- One audit event per job a bulk action changed: tenant $1, at $2, by $3, method $4, the
-- jobs' ids $5, request id $6 (audit_events, migration 0013).
INSERT INTO audit_events (tenant_id, at, actor, method, resource, code, request_id)
SELECT $1, $2, $3, $4, u.resource, 'OK', $6
  FROM unnest($5::text[]) AS u(resource);

-- name: due_timed_pauses
-- Up to $2 paused jobs of any tenant whose pause_until passed at $1, oldest first
-- (jobs_pause_until_idx), with what resuming them needs (select_jobs' columns and the
-- tenant). Not locked: resume_jobs writes only at the version read here, so two
-- replicas resuming the same job write it once.
SELECT j.job_id, j.tenant_id, coalesce(j.client_job_id, j.job_id::text) AS shown, j.name,
       j.version, j.fired_count, j.last_fire_at, d.schedule::text AS schedule,
       d.calendars::text AS calendars
  FROM jobs j
  JOIN job_definitions d ON d.job_id = j.job_id
 WHERE j.pause_until IS NOT NULL AND j.pause_until <= $1 AND j.paused
 ORDER BY j.pause_until
 LIMIT $2;

-- fragment: tenant_run_range
-- One status's range of tenant $1's runs for list_tenant_runs: newest first, before the
-- cursor ($3, $4), scheduled in [$5, $6).
r.tenant_id = $1
   AND ($3::timestamptz IS NULL OR r.scheduled_at <= $3::timestamptz)
   AND ($3::timestamptz IS NULL OR (r.scheduled_at, r.job_id) < ($3::timestamptz, $4::uuid))
   AND ($5::timestamptz IS NULL OR r.scheduled_at >= $5::timestamptz)
   AND ($6::timestamptz IS NULL OR r.scheduled_at < $6::timestamptz)

-- name: list_tenant_runs
-- Tenant-wide ListRuns: a page of tenant $1's runs in the statuses $2 (every status when
-- no filter), newest scheduled_at first, then by job uid descending, after the cursor
-- ($3, $4), scheduled in [$5, $6). Each status is read from two indexes (a lateral
-- subquery: the status a constant of its own level): the runs not in flight from
-- job_runs_tenant_status_idx in order (migration 0026: the index gives the order, no sort
-- is needed), the runs in flight (queued and published, or running: at most the
-- tenant's window and cap) from job_runs_tenant_inflight_idx, sorted; the two merged, at
-- most $15 runs each status (the page's scan budget shared by the statuses). Each
-- branch repeats its index's predicate as written. Where a status used its whole
-- share, runs past it are not known yet: the scan keeps only the runs at or above the
-- highest such cut (the boundary, returned with every row), so the next page starts
-- after it and none is skipped. Of the runs kept, those passing the filters the indexes
-- do not serve are the page: kinds $7, first start in [$8, $9), their job's labels
-- ($10: the tenant-keyed document, $11: a path predicate, as job_filters' $2 and $3),
-- late only ($12, judged at $13: see ListRunsRequest.late_only). Runs of deleted jobs
-- are left out. The page is at most $14 runs; a scan that kept none answers one row with
-- NULL run columns.
WITH per_status AS (
    SELECT x.*
      FROM unnest($2::text[]) AS s(status)
     CROSS JOIN LATERAL (
         (SELECT {run_columns}
            FROM job_runs r
           WHERE {tenant_run_range} AND r.status = s.status
             AND r.status <> 'running' AND (r.status <> 'queued' OR r.dispatch_seq <= 0)
           ORDER BY r.scheduled_at DESC, r.job_id DESC
           LIMIT $15)
         UNION ALL
         (SELECT {run_columns}
            FROM job_runs r
           WHERE {tenant_run_range} AND r.status = s.status
             AND (r.status = 'running' OR (r.status = 'queued' AND r.dispatch_seq > 0))
           ORDER BY r.scheduled_at DESC, r.job_id DESC
           LIMIT $15)
         ORDER BY scheduled_at DESC, job_id DESC
         LIMIT $15) AS x
), lowest AS (
    SELECT DISTINCT ON (status) status, scheduled_at, job_id
      FROM per_status
     ORDER BY status, scheduled_at, job_id
), boundary AS (
    SELECT l.scheduled_at, l.job_id
      FROM lowest l
     WHERE (SELECT count(*) FROM per_status p WHERE p.status = l.status) >= $15
     ORDER BY l.scheduled_at DESC, l.job_id DESC
     LIMIT 1
), scanned AS (
    SELECT p.*
      FROM per_status p
      LEFT JOIN boundary b ON true
     WHERE b.scheduled_at IS NULL OR (p.scheduled_at, p.job_id) >= (b.scheduled_at, b.job_id)
), judged AS (
    SELECT s.*, row_number() OVER (ORDER BY s.scheduled_at DESC, s.job_id DESC) AS n,
           d.job_id IS NOT NULL
           AND ($7::text[] IS NULL OR s.kind = ANY($7::text[]))
           AND ($8::timestamptz IS NULL OR s.started_at >= $8::timestamptz)
           AND ($9::timestamptz IS NULL OR s.started_at < $9::timestamptz)
           AND ($10::jsonb IS NULL
                OR sundial_tenant_labels(d.tenant_id, d.labels) @> $10::jsonb)
           AND ($11::jsonpath IS NULL OR d.labels @@ $11::jsonpath)
           AND (NOT $12::boolean OR (
                s.kind = 'scheduled'
                AND coalesce(s.started_at, CASE WHEN s.status IN ('pending', 'queued')
                                               THEN $13::timestamptz END)
                    > s.scheduled_at
                      + make_interval(secs => sundial_json_seconds(d.schedule ->> 'jitter')
                          + sundial_json_seconds(d.policies ->> 'lateness_threshold'))))
           AS hit,
           sundial_dispatch_schedule(d.schedule, d.calendars) AS schedule
      FROM scanned s
      LEFT JOIN job_definitions d ON d.job_id = s.job_id AND d.tenant_id = $1
), summary AS (
    SELECT count(*) AS scanned FROM judged
)
SELECT sm.scanned, b.scheduled_at AS last_at, b.job_id AS last_job, page.*
  FROM summary sm
  LEFT JOIN boundary b ON true
  LEFT JOIN LATERAL (SELECT * FROM judged WHERE hit ORDER BY n LIMIT $14) page ON true
 ORDER BY page.n;
