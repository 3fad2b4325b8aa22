-- The admission's read of a tenant's next waiting runs, always in run_waits_order_idx's
-- order (issue 29, docs/design.md section 8, "Plans that stay index probes").
--
-- A herd fills run_waits within seconds of an ANALYZE that saw it nearly empty, so the
-- planner believes a tenant has a handful of waiting runs and reads them all with a
-- bitmap scan and a sort: every admission pass of a 20k herd read and sorted the 3,000
-- to 12,500 runs still waiting to return 128 (6-9 ms a call in auto_explain's samples,
-- a cost growing with the herd). Read in the index's order, a pass reads about the rows
-- it returns. The order is asked of the planner, not hoped for: the statement runs in
-- a function whose SET makes any plan that sorts the last resort (a SET also keeps the
-- function from being inlined, which would drop it). One statement, as queries.sql's
-- next_waiting was: up to p_limit waiting runs of tenant p_tenant in partitions
-- p_partitions, the highest priority and oldest due first, of rate-limit key p_key when
-- it is not NULL, else of any key but the held ones p_held.
CREATE FUNCTION sundial_next_waiting(
    p_tenant text, p_partitions smallint[], p_key text, p_limit integer, p_held text[]
) RETURNS TABLE (job_id uuid, scheduled_at timestamptz, partition_id smallint)
LANGUAGE sql STABLE
SET enable_sort = off
AS $$
    SELECT w.job_id, w.scheduled_at, w.partition_id
      FROM run_waits w
     WHERE w.tenant_id = p_tenant AND w.partition_id = ANY(p_partitions)
       AND (CASE WHEN p_key IS NULL THEN w.rate_key <> ALL(p_held)
                 ELSE w.rate_key = p_key END)
     ORDER BY w.priority, w.due_at
     LIMIT p_limit
$$;
