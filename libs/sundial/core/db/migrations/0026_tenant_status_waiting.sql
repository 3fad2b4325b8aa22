-- The tenant-wide run index without the runs in flight (issue 29, docs/design.md
-- sections 5 and 8). A run's admission (queued, dispatch_seq set) and its lease (running)
-- each inserted one more entry into job_runs_tenant_status_idx; those runs are the ones
-- job_runs_tenant_inflight_idx holds, at most the tenant's window and its cap, so
-- ListRuns reads them there (list_tenant_runs: a second, bounded range per status). The
-- predicate is the exact complement of job_runs_tenant_inflight_idx's: every run is in
-- one of the two. Queries on this index repeat the predicate as written here.
DROP INDEX job_runs_tenant_status_idx;
CREATE INDEX job_runs_tenant_status_idx
    ON job_runs (tenant_id, status, scheduled_at DESC, job_id DESC)
    WHERE status <> 'running' AND (status <> 'queued' OR dispatch_seq <= 0);
