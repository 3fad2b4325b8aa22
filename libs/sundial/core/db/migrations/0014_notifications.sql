-- Failure policy and notifications (docs/design.md section 12).
--
-- job_stats keeps the job's dead runs in a row (reset by a success, and by ResumeJob),
-- and whether the failure policy wants the job paused (pause_due: set by the
-- transaction whose dead run reached the threshold; cleared by the pause, which that
-- transaction makes unless the jobs row is locked at that moment, and then the sweeper's
-- next pass does). Its partial index holds only the jobs waiting for such a pause, so
-- the sweep's look at it costs one probe of an index that is nearly always empty, and
-- the counter's own updates stay HOT (no indexed column changes).
ALTER TABLE job_stats
    ADD COLUMN consecutive_dead integer NOT NULL DEFAULT 0,
    ADD COLUMN pause_due boolean NOT NULL DEFAULT false,
    ADD COLUMN pause_reason text;
CREATE INDEX job_stats_pause_due_idx ON job_stats (job_id) WHERE pause_due;

-- Where a tenant's job events go.
CREATE TABLE notification_channels (
    channel_id      uuid        PRIMARY KEY,
    tenant_id       text        NOT NULL,
    display_name    text        COLLATE "C" NOT NULL,
    -- sundial.v1.Target in the proto JSON mapping (as job_definitions.target).
    target          jsonb       NOT NULL,
    -- 'dead_run', 'auto_paused', 'misfire_skipped', 'late_run'.
    event_kinds     text[]      NOT NULL,
    digest_window_s integer     NOT NULL DEFAULT 0,
    version         bigint      NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (tenant_id, display_name)
);

-- The event outbox: one row per (event, channel that wants it), written in the
-- transaction of the fact that caused it (a dead run, an auto-pause, a misfire skip),
-- so an event is recorded exactly when its fact commits. due_at: when its channel's
-- digest window ends (the event's time for a channel without one). The notifier turns
-- due events into notifications and deletes them.
CREATE TABLE notification_events (
    event_id    bigserial   PRIMARY KEY,
    channel_id  uuid        NOT NULL,
    tenant_id   text        NOT NULL,
    kind        text        NOT NULL,
    job_id      uuid,
    -- What the event says: the job's name, the run key, the error, counts.
    detail      jsonb       NOT NULL,
    occurred_at timestamptz NOT NULL,
    due_at      timestamptz NOT NULL
);
CREATE INDEX notification_events_due_idx ON notification_events (due_at);
CREATE INDEX notification_events_channel_idx ON notification_events (channel_id, event_id);

-- Notifications to deliver (one per event, or one per digest): the body is fixed when
-- the notification is made, so every retry sends the same bytes under the same
-- notification_id (the Idempotency-Key). state: 'pending' (next_attempt_at: due, or the
-- claim's end while a notifier sends it), 'delivered', 'failed' (attempts used up or the
-- channel deleted).
CREATE TABLE notifications (
    notification_id uuid        PRIMARY KEY,
    channel_id      uuid        NOT NULL,
    tenant_id       text        NOT NULL,
    body            bytea       NOT NULL,
    event_count     integer     NOT NULL,
    state           text        NOT NULL DEFAULT 'pending',
    attempt         integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL,
    finished_at     timestamptz
);
CREATE INDEX notifications_due_idx ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_finished_idx ON notifications (finished_at) WHERE state <> 'pending';
CREATE INDEX notification_channels_tenant_idx ON notification_channels (tenant_id);

-- The failure policy's pause, shared by the ledger (right after the dead run that
-- reached the threshold) and the sweeper (the backstop for a job whose row was locked
-- then): of the jobs $1 with pause_due, those whose jobs row it can lock without
-- waiting (SKIP LOCKED: the caller holds run and stats rows, and waiting for a jobs row
-- after those would invert the lock order) are paused with their pause_reason as the
-- note, a new version (the revision trigger records it, changed_by 'failure-policy')
-- and an auto_paused event for every channel that wants one. A job already paused
-- (by hand meanwhile) only has pause_due cleared. Returns the jobs it paused.
CREATE FUNCTION sundial_apply_failure_pauses(job_ids uuid[], at timestamptz)
RETURNS SETOF uuid
LANGUAGE sql AS $$
    WITH due AS (
        SELECT j.job_id, j.tenant_id, j.name, j.paused
          FROM jobs j
          JOIN job_stats s ON s.job_id = j.job_id
         WHERE j.job_id = ANY(job_ids) AND s.pause_due
         ORDER BY j.job_id
           FOR UPDATE OF j SKIP LOCKED
    ), stats AS (
        UPDATE job_stats s
           SET pause_due = false, updated_at = at
          FROM due
         WHERE s.job_id = due.job_id
        RETURNING s.job_id, s.pause_reason, s.consecutive_dead
    ), paused AS (
        UPDATE jobs j
           SET paused = true, version = j.version + 1, updated_at = at
          FROM due
         WHERE j.job_id = due.job_id AND NOT due.paused
        RETURNING j.job_id, j.tenant_id, j.name
    ), noted AS (
        UPDATE job_definitions d
           SET pause_note = stats.pause_reason, changed_by = 'failure-policy',
               change_request_id = NULL
          FROM paused JOIN stats ON stats.job_id = paused.job_id
         WHERE d.job_id = paused.job_id
        RETURNING d.job_id
    ), events AS (
        INSERT INTO notification_events
            (channel_id, tenant_id, kind, job_id, detail, occurred_at, due_at)
        SELECT c.channel_id, paused.tenant_id, 'auto_paused', paused.job_id,
               jsonb_build_object('job_id', paused.job_id, 'job_name', paused.name,
                                  'pause_note', stats.pause_reason,
                                  'consecutive_dead', stats.consecutive_dead),
               at, at + make_interval(secs => c.digest_window_s)
          FROM paused
          JOIN stats ON stats.job_id = paused.job_id
          JOIN notification_channels c
            ON c.tenant_id = paused.tenant_id AND 'auto_paused' = ANY(c.event_kinds)
    )
    SELECT job_id FROM paused;
$$;
