-- The jobs row carries a digest of the definition's schedule and policies.
--
-- The dispatcher needs a claimed job's schedule and policies to plan it. A herd of
-- thousands of jobs shares a handful of documents; with the digest in the row it locks,
-- the dispatcher reads a document only for a digest it has not cached (one job per
-- digest), not every claimed job's definition. The digest is written by the statement
-- that writes the definition (the API's insert_jobs and update_job), from the stored
-- jsonb's text, so the same document always has the same digest: md5 as a uuid, 128
-- bits, because two documents sharing a digest would plan one job on another's schedule.
ALTER TABLE jobs ADD COLUMN definition_digest uuid;

UPDATE jobs j
   SET definition_digest = md5(d.schedule::text || ' ' || d.policies::text)::uuid
  FROM job_definitions d
 WHERE d.job_id = j.job_id;
