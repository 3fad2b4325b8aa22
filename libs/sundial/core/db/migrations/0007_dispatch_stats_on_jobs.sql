-- A job's last fire and its lateness move from job_stats to the jobs row.
--
-- The dispatcher updates every claimed jobs row anyway (next_run_at, fired_count); the
-- two values it also recorded per dispatch cost a job_stats upsert per job in the hot
-- transaction (an index probe and a second tuple). Written with the jobs row they cost
-- 16 bytes; job_stats is now written at dispatch only for the rare job whose dispatch
-- dropped misfired occurrences or skipped overlapping ones. last_dispatch_at was never
-- read: it goes.
ALTER TABLE jobs ADD COLUMN last_fire_at timestamptz, ADD COLUMN last_lateness_ms bigint;

UPDATE jobs j
   SET last_fire_at = s.last_fire_at, last_lateness_ms = s.last_lateness_ms
  FROM job_stats s
 WHERE s.job_id = j.job_id AND (s.last_fire_at IS NOT NULL OR s.last_lateness_ms IS NOT NULL);

ALTER TABLE job_stats
    DROP COLUMN last_fire_at,
    DROP COLUMN last_dispatch_at,
    DROP COLUMN last_lateness_ms;
