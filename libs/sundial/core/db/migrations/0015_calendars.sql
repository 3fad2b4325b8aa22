-- Calendars (issue 16 item 2): tenant-level named sets of dates that remove occurrences
-- of the schedules referencing them (EXCLUDE: holidays) or keep only those dates
-- (INCLUDE), evaluated as local dates in each job's zone (docs/design.md section 4).
--
-- A schedule references calendars by name (job_definitions.schedule -> 'calendars').
-- The scheduler must plan with the calendars' contents, and must notice when they
-- change, so each definition row carries a copy of the contents of the calendars its
-- schedule references (job_definitions.calendars), and the definition digest of
-- migration 0008 covers it: the API writes the copy with the definition, and an
-- UpdateCalendar rewrites the copy, the digest and next_run_at of every referencing
-- job in its own transaction. A digest still names one document forever.

CREATE TABLE calendars (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name        text        COLLATE "C" NOT NULL,
    description text        NOT NULL DEFAULT '',
    kind        text        NOT NULL CHECK (kind IN ('EXCLUDE', 'INCLUDE')),
    -- 'YYYY-MM-DD' (one date) and 'MM-DD' (every year), sorted, no duplicates.
    dates       text[]      NOT NULL,
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- The referenced calendars' contents, in reference order:
-- [{"name": ..., "kind": "EXCLUDE", "dates": [...]}]; NULL when the schedule
-- references none (every job written before this migration).
ALTER TABLE job_definitions ADD COLUMN calendars jsonb;

-- The jobs that reference a calendar (UpdateCalendar, DeleteCalendar): a GIN index on
-- the names, probed with `schedule -> 'calendars' ? name`.
CREATE INDEX job_definitions_calendars_idx
    ON job_definitions USING gin ((schedule -> 'calendars'))
    WHERE calendars IS NOT NULL;

-- The schedule document the scheduler plans with: the stored one, plus the calendars'
-- contents under "resolved_calendars" when it references any.
CREATE FUNCTION sundial_dispatch_schedule(schedule jsonb, calendars jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN calendars IS NULL THEN schedule
                ELSE schedule || jsonb_build_object('resolved_calendars', calendars) END
$$;

-- The definition digest: migration 0008's md5 of the schedule and policies documents,
-- over the dispatch schedule (so it is unchanged for a job without calendars).
CREATE FUNCTION sundial_definition_digest(schedule jsonb, policies jsonb, calendars jsonb)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(sundial_dispatch_schedule(schedule, calendars)::text || ' ' || policies::text)::uuid
$$;
