-- Tenant-qualified calendar references: UpdateCalendar and DeleteCalendar find the jobs
-- naming a calendar through an index that holds only this tenant's references to this
-- calendar (docs/design.md section 3, "Calendars").
--
-- Migration 0015's GIN index on `schedule -> 'calendars'` held bare names, so a probe for
-- `holidays` returned every tenant's jobs naming a `holidays` and the tenant was filtered
-- after the join: one tenant's calendar write read (and DeleteCalendar sorted) another
-- tenant's million jobs. job_definitions has no tenant column, so the references are
-- stored qualified, '<tenant_id>/<name>' ('/' is in neither a stored tenant id nor a
-- calendar name), written by the API's job writes with the schedule (insert_jobs,
-- update_job: the only statements writing job_definitions.schedule) through
-- sundial_calendar_keys, and NULL when the schedule names none.

CREATE FUNCTION sundial_calendar_key(tenant_id text, name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT tenant_id || '/' || name
$$;

CREATE FUNCTION sundial_calendar_keys(tenant_id text, schedule jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(schedule -> 'calendars') = 'array'
                     AND jsonb_array_length(schedule -> 'calendars') > 0
                THEN ARRAY(SELECT sundial_calendar_key(tenant_id, n)
                             FROM jsonb_array_elements_text(schedule -> 'calendars') AS n)
           END
$$;

ALTER TABLE job_definitions ADD COLUMN calendar_keys text[];

UPDATE job_definitions d
   SET calendar_keys = sundial_calendar_keys(j.tenant_id, d.schedule)
  FROM jobs j
 WHERE j.job_id = d.job_id AND d.schedule ? 'calendars';

DROP INDEX job_definitions_calendars_idx;

-- Probed with `calendar_keys @> ARRAY[sundial_calendar_key(tenant, name)]`.
CREATE INDEX job_definitions_calendar_keys_idx
    ON job_definitions USING gin (calendar_keys)
    WHERE calendar_keys IS NOT NULL;
