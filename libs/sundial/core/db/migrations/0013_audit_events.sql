-- The audit log: one row per write call to the API (jobs, runs, tokens, tenants,
-- secrets, egress policies), who made it, on what, and how it ended; written by the
-- API's audit interceptor after the call, read by ListAuditEvents.
CREATE TABLE audit_events (
    event_id    bigserial   PRIMARY KEY,
    -- The tenant the call acted for or on (NULL: an admin call on no tenant).
    tenant_id   text,
    at          timestamptz NOT NULL,
    -- The caller's token id (`admin`: the bootstrap admin token).
    actor       text        NOT NULL,
    -- The RPC, e.g. sundial.v1.JobService/UpdateJob.
    method      text        NOT NULL,
    -- What it named: a job id, a run key, a tenant or token id ('' when nothing).
    resource    text        NOT NULL,
    -- How it ended: OK or the gRPC status code's name.
    code        text        NOT NULL,
    request_id  text        NOT NULL
);
CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, event_id DESC);
