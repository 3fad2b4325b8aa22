-- Client-chosen job ids (issue 14 item 1): a per-tenant alias of the job's UUID.
--
-- The UUID stays the job's identity everywhere else (run keys, partitions, NATS
-- messages, Idempotency-Key): only the API reads this column, to resolve a request that
-- names a job by its client id, and to create-or-update by it (ApplyJob). NULL for jobs
-- created without one. The form is job_service.proto's (AIP-122: 1-63 chars of a-z,
-- 0-9 and '-', starting with a letter, not ending with '-'); the API also refuses an id
-- that parses as a UUID, so a name is never both. The partial unique index is what
-- makes two concurrent applies of one new id end with one job.
ALTER TABLE jobs ADD COLUMN client_job_id text
    CHECK (client_job_id ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$');

CREATE UNIQUE INDEX jobs_tenant_client_job_id_key
    ON jobs (tenant_id, client_job_id) WHERE client_job_id IS NOT NULL;

-- What an ApplyJob with a request_id did (CREATED, UPDATED or UNCHANGED), so a retry
-- answers like the first call; NULL for the other methods' records.
ALTER TABLE job_requests ADD COLUMN outcome text;
