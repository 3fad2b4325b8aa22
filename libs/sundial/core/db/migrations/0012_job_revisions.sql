-- Job history: every change to a job keeps the definition it made as a revision (who,
-- when, which fields, the request id), written by a trigger in the same statement as
-- the change, so no write can skip it and none is recorded that did not commit.
--
-- The API names the writer on the definition row it writes (changed_by: the token id;
-- change_request_id: the RPC's request id); the triggers copy them with the row, the
-- job's name, paused state, version and update time from jobs (AFTER triggers see every
-- change of the statement that fired them, jobs' included).

ALTER TABLE job_definitions
    ADD COLUMN changed_by text,
    ADD COLUMN change_request_id text;

CREATE TABLE job_revisions (
    job_id          uuid        NOT NULL,
    version         bigint      NOT NULL,
    tenant_id       text        NOT NULL,
    name            text        NOT NULL,
    paused          boolean     NOT NULL,
    schedule        jsonb       NOT NULL,
    target          jsonb       NOT NULL,
    policies        jsonb       NOT NULL,
    payload         bytea       NOT NULL,
    labels          jsonb       NOT NULL,
    description     text        NOT NULL,
    pause_note      text        NOT NULL,
    -- What changed from the previous revision ({created} for the first; {} for the state
    -- a job had when this migration ran).
    changed_fields  text[]      NOT NULL,
    changed_by      text,
    request_id      text,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (job_id, version)
);
-- Revisions outlive their job (DeleteJob keeps the history, as an audit trail does).

-- A new job's first revision: one set-based insert per statement (BatchCreateJobs
-- writes a thousand definitions in one), from the statement's new rows.
CREATE FUNCTION sundial_record_first_revisions() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_revisions
        (job_id, version, tenant_id, name, paused, schedule, target, policies, payload,
         labels, description, pause_note, changed_fields, changed_by, request_id, created_at)
    SELECT j.job_id, j.version, j.tenant_id, j.name, j.paused, n.schedule, n.target,
           n.policies, n.payload, n.labels, n.description, n.pause_note, ARRAY['created'],
           n.changed_by, n.change_request_id, j.updated_at
      FROM new_definitions n
      JOIN jobs j ON j.job_id = n.job_id
    ON CONFLICT (job_id, version) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_first_revision
    AFTER INSERT ON job_definitions
    REFERENCING NEW TABLE AS new_definitions
    FOR EACH STATEMENT EXECUTE FUNCTION sundial_record_first_revisions();

-- A change to an existing job (one job per statement): the fields that differ from its
-- latest revision.
CREATE FUNCTION sundial_record_job_revision() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    j    record;
    prev record;
    changed text[];
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
    RETURN NULL;
END
$$;

CREATE TRIGGER job_revision
    AFTER UPDATE ON job_definitions
    FOR EACH ROW EXECUTE FUNCTION sundial_record_job_revision();

-- The jobs that exist now start their history with their current state.
INSERT INTO job_revisions
    (job_id, version, tenant_id, name, paused, schedule, target, policies, payload, labels,
     description, pause_note, changed_fields, created_at)
SELECT j.job_id, j.version, j.tenant_id, j.name, j.paused, d.schedule, d.target, d.policies,
       d.payload, d.labels, d.description, d.pause_note, '{}', j.updated_at
  FROM jobs j JOIN job_definitions d ON d.job_id = j.job_id;
