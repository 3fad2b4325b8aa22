-- Issue 10: the internal plane is authenticated and leases are fenced on their holder.

-- Executor tokens: RunLedger credentials, issued through AdminService like the others,
-- hashed the same way, tied to no tenant.
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('tenant', 'admin', 'executor'));
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_tenant;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_tenant CHECK ((role = 'tenant') = (tenant_id IS NOT NULL));

-- A lease is (attempt, executor_id, lease_id): lease_id is drawn at random with each new
-- grant and kept on an idempotent re-grant. Heartbeat and CompleteRuns must present it,
-- so no caller but the holder can extend or end an attempt. NULL on runs never leased
-- (and on rows leased before this migration: those are fenced by attempt and executor).
ALTER TABLE job_runs ADD COLUMN lease_id uuid;

-- The credential (api_tokens.token_id) the lease was granted to. executor_id is chosen by
-- the caller, so the idempotent re-grant (which returns the lease id) also requires the
-- same token: an executor holding another token cannot obtain a lease by claiming its
-- holder's executor_id.
ALTER TABLE job_runs ADD COLUMN lease_token_id uuid;
