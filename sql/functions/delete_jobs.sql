-- acta.delete_jobs(ids) -> how many job rows it deleted
-- Contract: deletes the job rows of p_ids, in acta.jobs or acta.succeeded_jobs (migration 0023), with
-- every row that refers to them (acta.delete_job_references).
-- The one place that knows where a finished row lives (docs/retention.md): acta.prune_jobs
-- (sys.retention's batches) and acta.complete_executions (a fire under retention zero) delete
-- through it; the completion's own retention-zero delete (`gone`) is the one other, in the
-- statement that ends the attempt, and it too leaves the references to acta.delete_job_references.
-- The caller passes finished rows it holds locked and has judged free to go (prune_jobs' `keep`
-- clause; the completion's own rows): this function judges nothing.
-- Fence: none (finished rows have no attempt left). Locks: the rows it deletes; executions and
-- steps are written only by a running attempt, so no lock order to share with a completion.
-- Durability: the caller's. Plan: jobs_pkey, succeeded_jobs_pkey, executions_pkey, steps_pkey and signals_job_idx
-- (migration 0019) by job id, whatever the caller's planner settings (acta.complete_executions turns plain index scans off).
create or replace function acta.delete_jobs(p_ids bigint[]) returns integer
language plpgsql
set enable_seqscan = off
set enable_indexscan = on
set jit = off
as $$
declare
  v_ids bigint[];
begin
  with gone as (
    delete from acta.jobs j where j.id = any (p_ids) returning j.id
  ),
  moved_gone as (
    delete from acta.succeeded_jobs s where s.id = any (p_ids) returning s.id
  )
  select coalesce(array_agg(g.id), '{}') into v_ids from (select id from gone union all select id from moved_gone) g;
  if cardinality(v_ids) > 0 then
    perform acta.delete_job_references(v_ids);
  end if;
  return cardinality(v_ids);
end
$$;
