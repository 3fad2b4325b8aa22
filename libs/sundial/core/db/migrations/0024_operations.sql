-- Operating thousands of jobs (docs/design.md section 13): tenant-wide run queries,
-- label selectors and bulk actions, timed pauses.

-- Tenant-wide ListRuns: a tenant's runs in one status, newest first, with the job uid as
-- the tie-break of the keyset. One index serves every status filter: a query over
-- several statuses merges one ordered range per status (a MergeAppend), so a page reads
-- about page-size entries whatever the history holds. Built on every daily partition.
CREATE INDEX job_runs_tenant_status_idx
    ON job_runs (tenant_id, status, scheduled_at DESC, job_id DESC);

-- Label selectors: a GIN index on each job's labels keyed by its tenant
-- ({"<tenant>": {labels}}), so a probe for customer=42 finds this tenant's jobs only,
-- however many jobs of other tenants carry the same label (the index of migration 0001
-- held every tenant's labels under one key). job_definitions gets the tenant's id, which
-- never changes, written by insert_jobs.
ALTER TABLE job_definitions ADD COLUMN tenant_id text;

UPDATE job_definitions d SET tenant_id = j.tenant_id FROM jobs j WHERE j.job_id = d.job_id;

-- A definition written without its tenant (a writer other than insert_jobs, after the
-- jobs row exists) gets it from the job: the label index never misses a job. insert_jobs
-- names it, so its rows only pay the NULL test.
CREATE FUNCTION sundial_definition_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL THEN
        SELECT tenant_id INTO NEW.tenant_id FROM jobs WHERE job_id = NEW.job_id;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER job_definition_tenant
    BEFORE INSERT ON job_definitions
    FOR EACH ROW EXECUTE FUNCTION sundial_definition_tenant();

-- jsonb_set, not jsonb_build_object: the index expression must be immutable throughout.
CREATE FUNCTION sundial_tenant_labels(tenant_id text, labels jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT jsonb_set('{}'::jsonb, ARRAY[tenant_id], labels)
$$;

CREATE INDEX job_definitions_tenant_labels_idx
    ON job_definitions USING gin (sundial_tenant_labels(tenant_id, labels) jsonb_path_ops);

DROP INDEX job_definitions_labels_idx;

-- Timed pauses: the instant a paused job resumes by itself (NULL: paused until resumed,
-- or not paused). The API's resumer probes the partial index for due ones.
ALTER TABLE jobs ADD COLUMN pause_until timestamptz;

CREATE INDEX jobs_pause_until_idx ON jobs (pause_until) WHERE pause_until IS NOT NULL;

-- Seconds of a duration in the proto JSON mapping ("60s", "0.250000s"), for the SQL
-- that reads a job's policies (ListRuns' late_only).
CREATE FUNCTION sundial_json_seconds(text) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT rtrim($1, 's')::double precision
$$;

-- RECOVERED notifications (docs/design.md section 12): the dead runs in a row a success
-- ended, written by the completion-stats upsert that every ending run makes (0 when the
-- last completion ended no streak), so the ledger tells RECOVERED without reading the
-- row again. Not indexed: the upsert stays a HOT update.
ALTER TABLE job_stats ADD COLUMN recovered_streak integer NOT NULL DEFAULT 0;
