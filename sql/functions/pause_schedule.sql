-- acta.pause_schedule(namespace, name, paused) -> whether it was paused before | null (no such schedule)
-- Contract: pauses or resumes the namespace's schedule `name`. A pause deletes its armed fire if
-- that has not started (Ready, never claimed), and with it the schedule's next fire; a fire that
-- has started finishes and arms nothing (acta.complete_executions). A resume arms nothing here:
-- the caller's schedules pass does (acta.arm_schedules). Writes nothing when nothing changes.
-- Fence: the fire is read by a statement begun once this call holds the schedule row, so a fire
-- armed by a completion that held the row meanwhile is the one deleted, never left to run while
-- the schedule is paused (test/recurring/schedules.test.ts, "a runtime write that waits").
-- Locks: the schedule row, then its fire's row, waiting for a claim that holds it (then it has
-- started). Nothing that locks a fire row never claimed waits for a schedule row: no deadlock.
-- Durability: the caller's commit. Plan: both by primary key.
create or replace function acta.pause_schedule(p_namespace text, p_name text, p_paused boolean)
returns boolean
language plpgsql as $$
declare
  v_was boolean;
begin
  perform 1 from acta.schedules s where s.namespace = p_namespace and s.name = p_name for update;
  with old as (
    select s.paused as was, s.job_id,
           p_paused and exists (select 1 from acta.jobs j where j.id = s.job_id and j.status = 'ready' and j.execution = 0) as unarm
    from acta.schedules s where s.namespace = p_namespace and s.name = p_name
  ),
  changed as (
    update acta.schedules s
    set paused = p_paused, updated_at = now(),
        job_id = case when o.unarm then null else s.job_id end,
        next_fire_at = case when o.unarm then null else s.next_fire_at end
    from old o
    where s.namespace = p_namespace and s.name = p_name and (o.was <> p_paused or o.unarm)
    returning 1
  ),
  unarmed as (
    delete from acta.jobs j using old o where o.unarm and j.id = o.job_id and j.status = 'ready' and j.execution = 0
  )
  select o.was into v_was from old o;
  return v_was;
end
$$;
