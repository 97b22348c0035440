-- acta.arm_schedules: arm the named schedules' next fires at the instants a worker computed
-- (docs/schedules.md; src/recurring/schedules.ts, the schedules pass).
--
-- Contract: p_names, p_versions and p_instants run in parallel. A schedule is armed only while it
-- needs a fire: not paused, still at the version the instant was computed for (a version is never
-- used twice for a name, a schedule removed and added again included: migration 0024), and no fire
-- armed or running (job_id null, or its job ended or gone: that fire's instant and outcome become
-- the schedule's last). The fire is a Ready job of the schedule's definition, payload, priority and
-- policy keys (migration 0021), due at its instant. Returns how many were armed. A fire's
-- completion arms the next one itself (acta.complete_executions, "Recurring fire"); this covers a
-- schedule added, changed or resumed, and a fire that ended elsewhere (recovery, a cancel).
-- Changed while a fire runs (docs/schedules.md, "Changes"): a schedule changed while its fire had
-- started or was due keeps that fire as its job_id with next_fire_at null, so no second fire runs
-- beside it.
-- Its instant (the new spec's first after the change) is stored here as next_fire_at, the pending
-- instant, and armed by that fire's end (acta.complete_executions), not here; not counted.
-- One fire per (schedule, instant): jobs_schedule_fire_idx; an instant already fired is not armed.
-- Locks: the namespace's schedule rows named, in name order, until commit; the new job rows.
-- Wakeup: NOTIFY acta_jobs when it armed any (a fire may be due at once).
create or replace function acta.arm_schedules(
  p_namespace text,
  p_names     text[],
  p_versions  integer[],
  p_instants  timestamptz[]
) returns integer
language plpgsql as $$
declare
  v_armed integer;
begin
  perform 1 from acta.schedules s
  where s.namespace = p_namespace and s.name = any (p_names)
  order by s.name
  for update;
  -- A fire that has started and not ended, kept through a change: its schedule gets the pending
  -- instant only (test/ledger/schedules.ts, "a change while a fire runs").
  update acta.schedules s
  set next_fire_at = w.at, updated_at = now()
  from unnest(p_names, p_versions, p_instants) as w(name, version, at), acta.jobs o
  where s.namespace = p_namespace and s.name = w.name and s.version = w.version
    and not s.paused and w.at is not null and s.next_fire_at is null
    and o.id = s.job_id and o.status not in ('succeeded', 'failed', 'cancelled');
  with wanted as (
    select s.namespace, s.name, s.definition, s.payload, s.priority, s.concurrency_key, s.rate_key, s.lane,
           w.at, o.id as ended_id, o.scheduled_at as ended_at, o.status as ended_status
    from unnest(p_names, p_versions, p_instants) as w(name, version, at)
    join acta.schedules s on s.namespace = p_namespace and s.name = w.name and s.version = w.version
    left join acta.jobs o on o.id = s.job_id
    where not s.paused and w.at is not null
      and (o.id is null or o.status in ('succeeded', 'failed', 'cancelled'))
  ),
  armed as (
    insert into acta.jobs (namespace, definition, payload, priority, run_at, schedule, scheduled_at, concurrency_key, rate_key, lane)
    select w.namespace, w.definition, w.payload, w.priority, w.at, w.name, w.at, w.concurrency_key, w.rate_key, w.lane from wanted w
    on conflict (namespace, schedule, scheduled_at) where schedule is not null do nothing
    returning id, schedule, scheduled_at
  )
  update acta.schedules s
  set job_id = a.id, next_fire_at = a.scheduled_at, updated_at = now(),
      last_fire_at = coalesce(w.ended_at, s.last_fire_at),
      last_job_id = coalesce(w.ended_id, s.last_job_id),
      last_outcome = coalesce(w.ended_status, s.last_outcome)
  from armed a join wanted w on w.name = a.schedule
  where s.namespace = p_namespace and s.name = a.schedule;
  get diagnostics v_armed = row_count;
  if v_armed > 0 then
    perform pg_notify('acta_jobs', p_namespace);
  end if;
  return v_armed;
end
$$;
