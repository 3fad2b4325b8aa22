-- Fewer index entries per run (issue 29, docs/design.md sections 5 and 8): every lease,
-- admission and completion rewrites its job_runs row without HOT (status and check_at
-- are indexed), so each new version is inserted into every index whose predicate it
-- meets. Two of those entries served nobody.

-- The tenant's RUNNING runs (its concurrent-run cap, a concurrency key's count) and its
-- runs in flight (the admission window) from one index: (tenant_id, status) over the
-- runs in flight, of which the running ones are one range. A grant wrote an entry into
-- both job_runs_tenant_running_idx and job_runs_tenant_inflight_idx; now one.
DROP INDEX job_runs_tenant_running_idx;
DROP INDEX job_runs_tenant_inflight_idx;
CREATE INDEX job_runs_tenant_inflight_idx ON job_runs (tenant_id, status)
    WHERE status = 'running' OR (status = 'queued' AND dispatch_seq > 0);

-- The sweep's index holds only runs with a check: a run waiting for admission (queued,
-- no check_at) or a released one before its check is set had an entry every sweep
-- skipped (NULLs sort after every due instant). The sweeps' conditions (check_at <= now,
-- check_at > now) imply the new predicate.
DROP INDEX job_runs_check_idx;
CREATE INDEX job_runs_check_idx ON job_runs (partition_id, check_at)
    WHERE status IN ('queued', 'running', 'retrying') AND check_at IS NOT NULL;
