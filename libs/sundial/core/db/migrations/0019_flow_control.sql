-- Flow control (issue 26, docs/design.md section 7 "Flow control"): fair sharing across
-- tenants by admission, per-key rate and concurrency limits, priority.

-- The tenant's weight in fair sharing; NULL follows the operator's default
-- (SUNDIAL_FAIR_WEIGHT). Its window of published-but-unfinished runs is
-- SUNDIAL_TENANT_WINDOW times it.
ALTER TABLE tenants ADD COLUMN fair_weight integer
    CHECK (fair_weight IS NULL OR fair_weight BETWEEN 1 AND 100);

-- A tenant's limits per key, and the rate limit's token bucket (tokens at refilled_at,
-- refilled at rate_per_s up to burst) with a target's Retry-After (blocked_until).
CREATE TABLE flow_limits (
    tenant_id     text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    key           text NOT NULL,
    rate_per_s    double precision NOT NULL DEFAULT 0 CHECK (rate_per_s >= 0),
    burst         integer NOT NULL DEFAULT 0 CHECK (burst >= 0),
    max_running   integer NOT NULL DEFAULT 0 CHECK (max_running >= 0),
    tokens        double precision NOT NULL DEFAULT 0,
    refilled_at   timestamptz NOT NULL DEFAULT now(),
    blocked_until timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

-- Runs waiting for admission: their job_runs row is 'queued' with dispatch_seq 0 and no
-- check_at (never published), and this row orders them: the tenant's highest priority
-- (1) first, then the oldest due. Admission deletes the row and makes the run due for
-- publish. rate_key is the run's rate-limit key, as the dispatcher resolved it.
CREATE TABLE run_waits (
    job_id       uuid NOT NULL,
    scheduled_at timestamptz NOT NULL,
    tenant_id    text NOT NULL,
    partition_id smallint NOT NULL,
    priority     smallint NOT NULL,
    due_at       timestamptz NOT NULL,
    rate_key     text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, scheduled_at)
);
-- Serves the admission's choice (tenant, then priority and due time; the owned
-- partitions filtered) and its skip scan of the tenants with waiting runs.
CREATE INDEX run_waits_order_idx ON run_waits (tenant_id, priority, due_at);

-- A tenant's window counts its runs in flight: published and not yet leased, or running.
CREATE INDEX job_runs_tenant_inflight_idx ON job_runs (tenant_id)
    WHERE status = 'running' OR (status = 'queued' AND dispatch_seq > 0);
