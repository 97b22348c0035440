-- acta.record_step: record a step's result for the attempt that ran it, fenced by
-- (job, execution, holder).
--
-- Contract: the step (p_job_id, p_name) is recorded with p_result only if the job row is still
-- Executing with execution = p_execution and held by p_worker (the attempt still owns the job). Returns one row:
--   recorded -> this call wrote it; result = p_result;
--   exists   -> an earlier attempt recorded it first; result = the recorded result (use it);
--   stale    -> the attempt no longer owns the job (recovered, fenced): nothing written; the
--               caller must abort the attempt.
-- Started: a recorded step proves the attempt's handler started, so the first record of an
-- attempt sets jobs.started, and recovery charges the attempt if it is lost (DESIGN.md,
-- Delivery: "charges ... only if its attempt had started"). Before, only a heartbeat reported a
-- start: an adversarial trial killed workers 300 ms into handlers that had recorded steps, and a
-- maxAttempts-1 job ran 4 times, its 3 lost attempts uncharged.
-- Locks: the job row for the rest of the transaction (the first record's UPDATE, later ones FOR
-- SHARE), so recovery (SKIP LOCKED) and a completion cannot move the row between the fence check
-- and the insert.
-- Steps are unique per (job, name): a recorded step never runs again (DESIGN.md, delivery).
-- The first form, before the holder joined the fence (only ever in development databases).
drop function if exists acta.record_step(bigint, integer, text, jsonb);

create or replace function acta.record_step(
  p_worker    uuid,
  p_job_id    bigint,
  p_execution integer,
  p_name      text,
  p_result    jsonb
) returns table (status text, result jsonb)
language plpgsql
-- No sequential scans: a plan made while acta.jobs held a few analyzed rows read the whole table
-- to find the job's row, and kept doing so as the table grew, until an ANALYZE replanned it
-- (test/db/plans.test.ts).
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_result jsonb;
begin
  update acta.jobs j set started = true
  where j.id = p_job_id and j.execution = p_execution and j.status = 'executing' and j.lease_holder = p_worker
    and not j.started;
  if not found then
    perform 1 from acta.jobs j
    where j.id = p_job_id and j.execution = p_execution and j.status = 'executing' and j.lease_holder = p_worker
    for share;
  end if;
  if not found then
    return query select 'stale'::text, null::jsonb;
    return;
  end if;
  insert into acta.steps (job_id, name, execution, result)
  values (p_job_id, p_name, p_execution, p_result)
  on conflict (job_id, name) do nothing;
  if found then
    return query select 'recorded'::text, p_result;
    return;
  end if;
  select s.result into v_result from acta.steps s where s.job_id = p_job_id and s.name = p_name;
  return query select 'exists'::text, v_result;
end
$$;
