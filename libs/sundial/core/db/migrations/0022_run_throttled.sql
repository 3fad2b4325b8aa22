-- Flow control (issue 26, docs/design.md sections 7 "Flow control" and 11): a run that
-- waited at admission for its rate-limit key (the tenant's own rate limit, or a target's
-- Retry-After) is marked, so its lateness is counted apart in the job's SLO
-- (JobSlo.throttled) and in sundial.occurrences.started{outcome="throttled"}: it is not
-- late by Sundial's fault. A constant default: no table rewrite.
ALTER TABLE job_runs ADD COLUMN throttled boolean NOT NULL DEFAULT false;
-- And whether a waiting run's key held it at dispatch (a block may be over by the time
-- the run is admitted).
ALTER TABLE run_waits ADD COLUMN throttled boolean NOT NULL DEFAULT false;
