-- Retention that reads only what it deletes (issue 25 item 7, docs/design.md section 7
-- "Tenants and their limits").
--
-- The retention pass found doomed revisions with a window (row_number per job) over the
-- whole of job_revisions, once per batch of 5,000, every pass of every API replica: a
-- read of every revision (a copy of each definition, payload included, of every job)
-- even when nothing was due to go. And audit_events had no index on its time, so its
-- purge scanned the table. Now:
--
-- * A revision says whether its job's history has moved past it (retired): 0 while it is
--   the newest of a live job, 1 once a newer revision is written (the trigger below marks
--   its predecessors), 2 once its job is deleted (a trigger on jobs). Only retired
--   revisions are indexed, by age, so the pass reads the revisions it deletes: retired 1
--   past the revision retention, retired 2 past the deleted job's. A live job's newest
--   revision is never in the index.
-- * The newest-N rule is kept where a job's history grows, in the trigger that writes a
--   change: the job keeps its tenant's revisions_per_job (tenants), else the operator's
--   default, which the API sets on its sessions as sundial.revisions_per_job
--   (SUNDIAL_REVISIONS_PER_JOB). A writer without the setting (a migration, psql) prunes
--   nothing; a lowered limit applies from the job's next change.
-- * audit_events is indexed by time.

ALTER TABLE job_revisions
    ADD COLUMN retired smallint NOT NULL DEFAULT 0 CHECK (retired BETWEEN 0 AND 2);

UPDATE job_revisions r SET retired = 2
 WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = r.job_id);
UPDATE job_revisions r SET retired = 1
 WHERE r.retired = 0
   AND EXISTS (SELECT 1 FROM job_revisions n
                WHERE n.job_id = r.job_id AND n.version > r.version);

CREATE INDEX job_revisions_retired_idx ON job_revisions (retired, created_at)
    WHERE retired > 0;

-- A change to an existing job (one job per statement): the fields that differ from its
-- latest revision (as in 0012); then its older revisions are retired, and those past the
-- newest revisions_per_job deleted.
CREATE OR REPLACE FUNCTION sundial_record_job_revision() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    j    record;
    prev record;
    changed text[];
    keep integer;
BEGIN
    SELECT job_id, tenant_id, name, paused, version, updated_at INTO j
      FROM jobs WHERE job_id = NEW.job_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO prev FROM job_revisions
     WHERE job_id = NEW.job_id ORDER BY version DESC LIMIT 1;
    IF FOUND AND prev.version >= j.version THEN
        RETURN NULL;  -- no new version: nothing the API changed
    END IF;
    IF NOT FOUND THEN
        changed := '{}';  -- no history to compare with
    ELSE
        changed := array_remove(ARRAY[
            CASE WHEN prev.name IS DISTINCT FROM j.name THEN 'name' END,
            CASE WHEN prev.paused IS DISTINCT FROM j.paused THEN 'paused' END,
            CASE WHEN prev.schedule IS DISTINCT FROM NEW.schedule THEN 'schedule' END,
            CASE WHEN prev.target IS DISTINCT FROM NEW.target THEN 'target' END,
            CASE WHEN prev.policies IS DISTINCT FROM NEW.policies THEN 'policies' END,
            CASE WHEN prev.payload IS DISTINCT FROM NEW.payload THEN 'payload' END,
            CASE WHEN prev.labels IS DISTINCT FROM NEW.labels THEN 'labels' END,
            CASE WHEN prev.description IS DISTINCT FROM NEW.description THEN 'description' END,
            CASE WHEN prev.pause_note IS DISTINCT FROM NEW.pause_note THEN 'pause_note' END
        ], NULL);
    END IF;
    INSERT INTO job_revisions
        (job_id, version, tenant_id, name, paused, schedule, target, policies, payload,
         labels, description, pause_note, changed_fields, changed_by, request_id, created_at)
    VALUES
        (j.job_id, j.version, j.tenant_id, j.name, j.paused, NEW.schedule, NEW.target,
         NEW.policies, NEW.payload, NEW.labels, NEW.description, NEW.pause_note, changed,
         NEW.changed_by, NEW.change_request_id, j.updated_at)
    ON CONFLICT (job_id, version) DO NOTHING;
    -- The job's earlier revisions (one, but for history written before 0028) are retired.
    UPDATE job_revisions SET retired = 1
     WHERE job_id = j.job_id AND version < j.version AND retired = 0;
    SELECT t.revisions_per_job INTO keep FROM tenants t WHERE t.tenant_id = j.tenant_id;
    keep := coalesce(keep, nullif(current_setting('sundial.revisions_per_job', true), '')::integer);
    IF keep >= 1 THEN
        -- Up to keep + 1 entries of the primary key, newest first.
        DELETE FROM job_revisions
         WHERE job_id = j.job_id
           AND version <= (SELECT version FROM job_revisions
                            WHERE job_id = j.job_id
                            ORDER BY version DESC OFFSET keep LIMIT 1);
    END IF;
    RETURN NULL;
END
$$;

-- A deleted job's revisions are kept for the deleted job's retention, then go.
CREATE FUNCTION sundial_retire_deleted_jobs_revisions() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Probes of the primary key by job id (a delete of many jobs too), never a join
    -- the planner could answer with a scan of every revision.
    UPDATE job_revisions SET retired = 2
     WHERE job_id = ANY (ARRAY(SELECT job_id FROM deleted_jobs)) AND retired < 2;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_deleted_revisions
    AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION sundial_retire_deleted_jobs_revisions();

CREATE INDEX audit_events_at_idx ON audit_events (at);
