-- Statements over every partition of job_runs planned once per connection, not once per
-- call (issue 29, docs/design.md section 8, "Plans that stay index probes").
--
-- A LeaseRuns call counts its tenants' RUNNING runs (tenant_lease_terms) and the runs of
-- its concurrency keys (concurrency_key_terms), an admission pass its tenants' runs in
-- flight (admission_terms), a dispatch its jobs' unfinished runs (live_run_counts).
-- Written inline, each of those statements was planned again on every call: PostgreSQL
-- keeps a custom plan for a prepared statement whose generic plan it estimates dearer,
-- and with an array of tenants or jobs as its parameter the generic plan always is; and
-- a count by tenant or job has no partition key to prune by, so every plan weighed every
-- daily partition of job_runs and each partition's seven indexes. With 38 partitions (30
-- days of retention and 7 ahead, the defaults) tenant_lease_terms took 2.2 ms of
-- planning a call for 0.06 ms of execution, a cost growing with the days kept, not with
-- the load.
--
-- Each is now a function, whose statement PostgreSQL keeps in its plan cache like a
-- prepared statement's (PostgreSQL 18 does so for a SQL function too). Its SET asks for
-- the generic plan (the plan does not depend on the tenants' or jobs' values), so the
-- statement is planned on a connection's first call and again only when job_runs
-- changes (a partition attached or dropped, a partition analyzed). enable_seqscan off
-- keeps that plan on the partial indexes whatever the partitions held when it was made:
-- a plan made while a partition was empty must not scan it whole once a herd has filled
-- it. A SET also keeps a function from being inlined, which would plan its statement
-- with the caller's again.

-- The tenant's RUNNING runs: its cap counts them (job_runs_tenant_inflight_idx's running
-- range).
CREATE FUNCTION sundial_running_runs(p_tenant text) RETURNS bigint
LANGUAGE sql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
    SELECT count(*) FROM job_runs r WHERE r.tenant_id = p_tenant AND r.status = 'running'
$$;

-- The tenant's runs in flight in the stream, published and not leased: its admission
-- window counts them (job_runs_tenant_inflight_idx's queued range).
CREATE FUNCTION sundial_inflight_runs(p_tenant text) RETURNS bigint
LANGUAGE sql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
    SELECT count(*)
      FROM job_runs r
     WHERE r.tenant_id = p_tenant AND r.status = 'queued' AND r.dispatch_seq > 0
$$;

-- The tenant's RUNNING runs whose job names the concurrency key p_key: the key's limit
-- counts them (the tenant's running range, at most its cap, each run's definition read).
CREATE FUNCTION sundial_key_running_runs(p_tenant text, p_key text) RETURNS bigint
LANGUAGE sql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
    SELECT count(*)
      FROM job_runs r
      JOIN job_definitions d ON d.job_id = r.job_id
     WHERE r.tenant_id = p_tenant AND r.status = 'running'
       AND d.policies -> 'flow' ->> 'concurrency_key' = p_key
$$;

-- The set-returning one is PL/pgSQL, whose statements PostgreSQL keeps prepared for the
-- connection (the same statement in a SQL function was planned on every call); its
-- output columns are named as the table's are, hence use_column.

-- The unfinished and the buffered (pending) runs of each job of p_jobs that has any
-- (job_runs_unfinished_idx, one probe per job and partition): its overlap policy needs
-- them.
CREATE FUNCTION sundial_live_run_counts(p_jobs uuid[])
RETURNS TABLE (job_id uuid, unfinished bigint, buffered bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT r.job_id, count(*), count(*) FILTER (WHERE r.status = 'pending')
      FROM job_runs r
     WHERE r.job_id = ANY(p_jobs) AND r.status IN ('pending', 'queued', 'running', 'retrying')
     GROUP BY r.job_id;
END
$$;
