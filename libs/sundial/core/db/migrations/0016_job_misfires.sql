-- Skipped misfires with their times, for a job's SLO (docs/design.md section 11).
-- job_stats.missed_count only counts them; an SLO window needs to know when they were
-- due. The dispatcher writes one row per job and dispatch that skipped misfired
-- occurrences (never on the normal dispatch path, which skips none): the nominal times
-- of the first and the last occurrence it skipped and how many (a lower bound when
-- the misfire walk jumped over a long outage: exact = false). The skipped occurrences of
-- one dispatch are consecutive occurrences of the schedule. No foreign key: kept after
-- the job is deleted, like its runs; rows older than the run retention are deleted by
-- the scheduler's maintenance.
CREATE TABLE job_misfires (
    job_id      uuid        NOT NULL,
    first_at    timestamptz NOT NULL,
    last_at     timestamptz NOT NULL,
    skipped     bigint      NOT NULL CHECK (skipped > 0),
    exact       boolean     NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, first_at),
    CHECK (first_at <= last_at)
);
CREATE INDEX job_misfires_recorded_idx ON job_misfires (recorded_at);
