-- acta.put_schedule(namespace, name, definition, spec…) -> 'added' | 'changed' | 'same' | 'declared'
-- Contract: adds the namespace's runtime schedule `name` or changes it (a new version, never one
-- the name had: migration 0024); 'declared': the name is a declared schedule's, not touched. A
-- change deletes the armed fire if it has not started (Ready, never claimed) and is not yet due
-- (run_at > now()): the caller's schedules pass arms the new spec's next instant. A fire that has
-- started, or whose instant has passed (owed: docs/schedules.md, "Changes"), stays the schedule's
-- (job_id kept, next_fire_at null) and runs under the old spec, judged at its claim by the catch-up
-- policy: its end arms the new spec's instant, never a fire beside it (acta.arm_schedules,
-- acta.complete_executions; test/ledger/schedules.ts, "a change while the armed fire is due").
-- The answer comes from the upsert's own row (xmax = 0: inserted).
-- Fence: the fire is read by a statement begun once this call holds the schedule row, so a fire
-- armed by a completion that held the row meanwhile is the one deleted, never run under the old
-- spec after the change (test/recurring/schedules.test.ts, "a runtime write that waits").
-- Locks: the schedule row, then its fire's row, waiting for a claim that holds it (then it has
-- started). Nothing that locks a fire row never claimed waits for a schedule row: no deadlock.
-- Durability: the caller's commit. Plan: both by primary key.
create or replace function acta.put_schedule(
  p_namespace          text,
  p_name               text,
  p_definition         text,
  p_cron               text,
  p_time_zone          text,
  p_payload            jsonb,
  p_catch_up           text,
  p_catch_up_window_ms bigint,
  p_priority           integer,
  p_concurrency_key    text,
  p_rate_key           text,
  p_lane               text
) returns text
language plpgsql as $$
declare
  v_answer text;
begin
  perform 1 from acta.schedules s where s.namespace = p_namespace and s.name = p_name for update;
  with old as (
    select s.source, s.job_id from acta.schedules s where s.namespace = p_namespace and s.name = p_name
  ),
  not_due as (
    select j.id from acta.jobs j
    where j.id = (select o.job_id from old o) and j.status = 'ready' and j.execution = 0 and j.run_at > now()
    for update
  ),
  put as (
    insert into acta.schedules as s (namespace, name, definition, cron, time_zone, payload, catch_up, catch_up_window_ms, priority,
                                     concurrency_key, rate_key, lane, source)
    values (p_namespace, p_name, p_definition, p_cron, p_time_zone, p_payload, p_catch_up, p_catch_up_window_ms, p_priority,
            p_concurrency_key, p_rate_key, p_lane, 'runtime')
    on conflict (namespace, name) do update
      set definition = excluded.definition, cron = excluded.cron, time_zone = excluded.time_zone, payload = excluded.payload,
          catch_up = excluded.catch_up, catch_up_window_ms = excluded.catch_up_window_ms, priority = excluded.priority,
          concurrency_key = excluded.concurrency_key, rate_key = excluded.rate_key, lane = excluded.lane,
          version = nextval(pg_get_serial_sequence('acta.schedules', 'version')::regclass),
          job_id = case when exists (select 1 from not_due) then null else s.job_id end, next_fire_at = null, updated_at = now()
      where s.source = 'runtime'
        and (s.definition, s.cron, s.time_zone, s.payload, s.catch_up, s.catch_up_window_ms, s.priority, s.concurrency_key, s.rate_key, s.lane)
            is distinct from (excluded.definition, excluded.cron, excluded.time_zone, excluded.payload, excluded.catch_up, excluded.catch_up_window_ms,
                              excluded.priority, excluded.concurrency_key, excluded.rate_key, excluded.lane)
    returning s.xmax = 0 as inserted
  ),
  unarmed as (
    delete from acta.jobs j using not_due u, put p
    where not p.inserted and j.id = u.id
  )
  select case when exists (select 1 from put where inserted) then 'added'
              when exists (select 1 from put) then 'changed'
              when (select source from old) = 'declared' then 'declared'
              else 'same' end
    into v_answer;
  return v_answer;
end
$$;
