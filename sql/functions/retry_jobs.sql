-- acta.retry_jobs: client.retryJobs and `acta jobs retry` (docs/operating.md, "Admin operations").
--
-- Contract: each job of p_ids that is Failed or Cancelled becomes Ready, due now, with a fresh
-- attempt count and no result; returns their ids. The recorded waits that depend on what was retried
-- happen anew (docs/workflows.md, "Child jobs" and "Signals"; test/db/retryWaits.test.ts):
--   * the job's signal waits that timed out lose their record, so each waits again with its timeout
--     counted anew (its replay would throw the recorded SignalTimeoutError at once); a signal
--     received stays recorded;
--   * a retried child has not ended for its parent any more: an unfinished parent (Ready, Executing
--     or Waiting) counts it open again, else the child's second end would be counted a second time
--     and resume the parent while a sibling still runs (test/db/workflows.test.ts, "a retried
--     child"). Its 'fail-parent' failure no longer fails the parent's wait unless another one's
--     does. The parent's recorded children waits that include the child (recorded in the attempt
--     that spawned it or a later one) lose their record, so its replay waits for the child's new
--     end rather than return it as it is now. An attempt of the parent running at that moment may
--     already hold the answer it read: its replay of that wait then returns the child as it is.
--   A parent that has ended is left as it is.
-- NOTIFY acta_jobs with p_namespace when a job was retried, as an enqueue does.
-- Fence: status Failed or Cancelled under the row's lock (a retry and a second one cannot both
-- apply); a parent's status is read once it is locked.
-- Locks: the retried rows, then their parents FOR UPDATE in id order (the family's lock order,
-- sql/functions/cancel_job.sql). A wake of a parent (acta.wake_job) takes the parent's lock, so
-- the statements after it see every children wait recorded before it and none is recorded until
-- commit. Durability: the caller's. Plan: by primary key (jobs, steps).
create or replace function acta.retry_jobs(p_namespace text, p_ids bigint[]) returns bigint[]
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_ids     bigint[];
  v_parents bigint[];
begin
  with done as (
    update acta.jobs j
    set status = 'ready', run_at = now(), attempts = 0, uncharged_returns = 0, result = null, finished_at = null,
        cancel_requested_at = null, blocked_by = null, fair_tag = null, lease_holder = null, lease_expires_at = null,
        claimed_at = null, started = false
    where j.id = any (p_ids) and j.status in ('failed', 'cancelled')
    returning j.id, j.parent_id
  )
  select coalesce(array_agg(d.id), '{}'), coalesce(array_agg(distinct d.parent_id) filter (where d.parent_id is not null), '{}')
  into v_ids, v_parents
  from done d;
  if cardinality(v_ids) = 0 then
    return v_ids;
  end if;
  delete from acta.steps s
  where s.job_id = any (v_ids) and s.name like 'acta:signal:%' and s.result -> 'timedOut' = 'true'::jsonb;
  if cardinality(v_parents) > 0 then
    perform 1 from acta.jobs p where p.id = any (v_parents) order by p.id for update;
    update acta.jobs p
    set children_open = coalesce(p.children_open, 0) + r.n,
        children_failed = case when coalesce(p.children_failed, false) then exists (
            select 1 from acta.jobs c
            where c.parent_id = p.id and c.fail_parent and c.status in ('failed', 'cancelled')
          ) else p.children_failed end
    from (
      select c.parent_id, count(*)::integer as n from acta.jobs c where c.id = any (v_ids) and c.parent_id is not null group by c.parent_id
    ) r
    where p.id = r.parent_id and p.status in ('ready', 'executing', 'waiting');
    -- A children wait includes every child spawned before it, so those recorded by the spawning
    -- attempt (it parked there, after the spawn) or a later one.
    delete from acta.steps w
    using acta.jobs p
    where p.id = any (v_parents) and p.status in ('ready', 'executing', 'waiting')
      and w.job_id = p.id and w.name like 'acta:children:%'
      and w.execution >= (
        select min(s.execution) from acta.steps s join acta.jobs c on c.parent_id = s.job_id
        where s.job_id = p.id and s.name like 'acta:spawn:%' and c.id = any (v_ids) and s.result -> 'ids' ? c.id::text
      );
  end if;
  perform pg_notify('acta_jobs', p_namespace);
  return v_ids;
end
$$;
