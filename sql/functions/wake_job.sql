-- acta.wake_job: a parked row runs again, its wait answered.
--
-- Contract: if job p_id is Waiting, it becomes Ready, due now, its wait cleared, and its wait's
-- step (wait_step) is recorded with p_answer for the attempt that parked it, so the same
-- waitForSignal / waitForChildren call returns it on the next attempt (src/workflows/). NOTIFY
-- acta_jobs with its namespace. Returns the step's name; null when the row was not Waiting.
-- Fence: status 'waiting' under the row's lock: a wake and a timeout or a second wake cannot
-- both apply. Locks: the row (the caller usually holds it already). Durability: the caller's.
-- Time: recorded_at is read after the row lock, so it never precedes the park it answers (a park
-- committed while the caller waited, or in the caller's own statement: settle_waits'), as the
-- ledger's other times (docs/decisions/2026-12-05-ledger-times.md). Plan: by primary key.
create or replace function acta.wake_job(p_id bigint, p_answer jsonb) returns text
language plpgsql
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_step      text;
  v_execution integer;
  v_namespace text;
begin
  select j.wait_step, j.execution, j.namespace into v_step, v_execution, v_namespace
  from acta.jobs j where j.id = p_id and j.status = 'waiting'
  for update;
  if not found then
    return null;
  end if;
  update acta.jobs j
  set status = 'ready', run_at = now(), wait_names = null, wait_step = null, wait_until = null
  where j.id = p_id;
  if v_step is not null then
    insert into acta.steps (job_id, name, execution, result, recorded_at)
    values (p_id, v_step, v_execution, coalesce(p_answer, 'null'::jsonb), clock_timestamp())
    on conflict (job_id, name) do nothing;
  end if;
  perform pg_notify('acta_jobs', v_namespace);
  return v_step;
end
$$;
