-- acta.delete_job_references(ids): deletes every row that refers to the job rows p_ids: their
-- attempts (acta.executions), recorded steps (acta.steps) and signals (acta.signals).
-- Contract: the caller has deleted those job rows in its transaction, or does so now: acta.delete_jobs
-- (retention's batches) and acta.complete_executions (retention zero's `gone`, deleted by the
-- statement that ends their attempt). Together with acta.delete_jobs, the one place that knows what
-- refers to a job (docs/retention.md).
-- Fence: none (the rows' attempts are over). Locks: the rows it deletes; executions and steps are
-- written only by a running attempt, so no lock order to share with a completion.
-- Durability: the caller's. Plan: executions_pkey, steps_pkey and signals_job_idx (migration 0019)
-- by job id, whatever the caller's planner settings (acta.complete_executions turns plain index scans off).
create or replace function acta.delete_job_references(p_ids bigint[]) returns void
language plpgsql
set enable_seqscan = off
set enable_indexscan = on
set jit = off
as $$
begin
  delete from acta.executions e where e.job_id = any (p_ids);
  delete from acta.steps s where s.job_id = any (p_ids);
  delete from acta.signals g where g.job_id = any (p_ids);
end
$$;
