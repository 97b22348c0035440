-- acta.record_step: record a step's result for the attempt that ran it, fenced by
-- (job, execution, holder).
--
-- Contract: the step (p_job_id, p_name) is recorded with p_result only if the attempt still owns
-- the job. Returns one row: 'recorded' (this call wrote it; result = p_result); 'exists' (an
-- earlier attempt recorded it first; result = the recorded one, to use); 'stale' (the attempt no
-- longer owns the job: nothing written, the caller aborts the attempt). Steps are unique per
-- (job, name): a recorded step never runs again (docs/DESIGN.md, "Delivery";
-- test/db/steps.test.ts). The first record of an attempt sets jobs.started, so recovery charges
-- the attempt if it is lost (test/faults/recovery.test.ts;
-- docs/decisions/2026-11-30-a-recorded-step-marks-its-attempt-started.md).
-- Fence: the row is Executing with execution = p_execution and held by p_worker.
-- Locks: the job row until commit (the first record's UPDATE, later ones FOR SHARE), so recovery
-- (SKIP LOCKED) and a completion cannot move the row between the fence check and the insert.
-- Time: recorded_at is read once the row is locked, so the attempt's end, written by whoever
-- locks the row after this commits, is later (docs/decisions/2026-12-05-ledger-times.md).
-- Durability: the caller's commit, synchronous by default: a recorded step is durable.
-- Plan: by primary key; no sequential scans (test/db/plans.test.ts;
-- docs/decisions/2026-11-30-plans-made-on-a-small-table.md).
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
-- No sequential scans: see Plan.
set enable_seqscan = off
set jit = off
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
  insert into acta.steps (job_id, name, execution, result, recorded_at)
  values (p_job_id, p_name, p_execution, p_result, clock_timestamp())
  on conflict (job_id, name) do nothing;
  if found then
    return query select 'recorded'::text, p_result;
    return;
  end if;
  select s.result into v_result from acta.steps s where s.job_id = p_job_id and s.name = p_name;
  return query select 'exists'::text, v_result;
end
$$;
