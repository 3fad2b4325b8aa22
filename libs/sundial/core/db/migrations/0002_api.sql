-- API service support (issue 4): quotas, token use, signing-secret rotation, idempotency
-- of several methods, and the run and stats fields the public API reports.

-- ---------------------------------------------------------------------------------------
-- Quota: jobs per tenant.
--
-- CreateJob/BatchCreateJobs add to job_count and DeleteJob subtracts, in the transaction
-- that writes the jobs, with one guarded statement:
--     UPDATE tenants SET job_count = job_count + n
--      WHERE tenant_id = $1 AND job_count + n <= max_jobs
-- The row lock it takes serialises concurrent creates of one tenant only from that
-- statement to the commit (it runs last), and counting is O(1) however many jobs exist.
-- ---------------------------------------------------------------------------------------

ALTER TABLE tenants ADD COLUMN job_count bigint NOT NULL DEFAULT 0 CHECK (job_count >= 0);

UPDATE tenants AS t
   SET job_count = c.n
  FROM (SELECT tenant_id, count(*) AS n FROM jobs GROUP BY tenant_id) AS c
 WHERE c.tenant_id = t.tenant_id;

-- ---------------------------------------------------------------------------------------
-- API tokens: when a token last authenticated a call (updated at most once a minute).
-- ---------------------------------------------------------------------------------------

ALTER TABLE api_tokens ADD COLUMN last_used_at timestamptz;

-- ListApiTokens: newest first, optionally for one tenant.
CREATE INDEX api_tokens_created_idx ON api_tokens (created_at DESC, token_id DESC);

-- ---------------------------------------------------------------------------------------
-- Signing secrets: every secret a tenant has had, so a rotation can overlap.
--
-- tenants.signing_secret stays and always holds the newest secret (what a reader that
-- signs with one secret uses). A secret signs calls while expires_at is NULL or in the
-- future; RotateSigningSecret sets expires_at on the older ones (now + overlap).
-- ---------------------------------------------------------------------------------------

CREATE TABLE tenant_signing_secrets (
    secret_id  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    -- The secret's UTF-8 bytes: the HMAC key (target.proto).
    secret     bytea NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);

CREATE INDEX tenant_signing_secrets_tenant_idx
    ON tenant_signing_secrets (tenant_id, created_at DESC);

INSERT INTO tenant_signing_secrets (tenant_id, secret, created_at)
SELECT tenant_id, signing_secret, created_at FROM tenants;

-- ---------------------------------------------------------------------------------------
-- Idempotency keys are unique per tenant AND method (job_service.proto), and remember
-- different results: CreateJob a job_id, BatchCreateJobs job_ids in request order,
-- TriggerJob the run (job_id, scheduled_at).
-- ---------------------------------------------------------------------------------------

ALTER TABLE job_requests ADD COLUMN method text NOT NULL DEFAULT 'CreateJob';
ALTER TABLE job_requests ALTER COLUMN method DROP DEFAULT;
ALTER TABLE job_requests ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE job_requests ADD COLUMN job_ids uuid[];
ALTER TABLE job_requests ADD COLUMN scheduled_at timestamptz;
ALTER TABLE job_requests DROP CONSTRAINT job_requests_pkey;
ALTER TABLE job_requests ADD PRIMARY KEY (tenant_id, method, request_id);

-- ---------------------------------------------------------------------------------------
-- Runs: fields of sundial.v1.Run with no column yet.
-- ---------------------------------------------------------------------------------------

-- How many times ReplayRun put the run back in the queue (written by the API).
ALTER TABLE job_runs ADD COLUMN replay_count integer NOT NULL DEFAULT 0
    CHECK (replay_count >= 0);
-- The last attempt's HTTP status (0/NULL: no response) and gRPC code (NULL: none or an
-- HTTP target); written by the ledger with the attempt's outcome, read by the API.
ALTER TABLE job_runs ADD COLUMN last_http_status integer;
ALTER TABLE job_runs ADD COLUMN last_grpc_code integer;

-- ---------------------------------------------------------------------------------------
-- Stats: runs that ended CANCELLED (JobStats.cancelled). The API counts the ones it
-- cancels at once (CancelRun on a pending/queued/retrying run); the ledger counts a
-- running run whose cancellation completes.
-- ---------------------------------------------------------------------------------------

ALTER TABLE job_stats ADD COLUMN cancelled_count bigint NOT NULL DEFAULT 0;
