-- acta.remove_schedule(namespace, name) -> 'removed' | 'declared' | null (no such schedule)
-- Contract: removes the namespace's runtime schedule `name` and its armed fire if that has not
-- started (Ready, never claimed); a fire that has started finishes, detached (docs/schedules.md,
-- "At runtime"). A declared schedule is kept ('declared': it is removed in code).
-- Fence: the fire is read by a statement begun once this call holds the schedule row, so a fire
-- armed by a completion that held the row meanwhile (acta.complete_executions, "Recurring fire")
-- is the one found and deleted, never left behind beside a schedule added again under the name
-- (test/recurring/schedules.test.ts, "a runtime write that waits").
-- Locks: the schedule row, then its fire's row, waiting for a claim that holds it (then it has
-- started). Nothing that locks a fire row never claimed waits for a schedule row: no deadlock.
-- Durability: the caller's commit. Plan: both by primary key.
create or replace function acta.remove_schedule(p_namespace text, p_name text)
returns text
language plpgsql as $$
declare
  v_source text;
  v_job    bigint;
begin
  select s.source into v_source from acta.schedules s where s.namespace = p_namespace and s.name = p_name for update;
  if v_source is distinct from 'runtime' then
    return v_source;
  end if;
  delete from acta.schedules s where s.namespace = p_namespace and s.name = p_name returning s.job_id into v_job;
  delete from acta.jobs j where j.id = v_job and j.status = 'ready' and j.execution = 0;
  return 'removed';
end
$$;
