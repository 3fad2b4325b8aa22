-- Per-tenant overrides of the operator's bounds on what a tenant can grow (issue 25,
-- docs/design.md section 7 "Tenants and their limits"): NULL follows the operator's
-- default (SUNDIAL_MAX_CALENDARS, SUNDIAL_MAX_WAITING_REQUESTED_RUNS,
-- SUNDIAL_REVISIONS_PER_JOB), so existing tenants keep today's behaviour.
ALTER TABLE tenants
    ADD COLUMN max_calendars integer,
    ADD COLUMN max_waiting_requested_runs bigint,
    ADD COLUMN revisions_per_job integer;
