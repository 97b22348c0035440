-- acta.reconcile_schedules: make the namespace's declared schedules of the named definitions what
-- their applied policy declares (acta.definitions.policy -> 'schedules', the newest live worker's
-- declaration: acta.refresh_definitions; docs/schedules.md, "Declared schedules").
--
-- Contract: a declared schedule missing from its definition's declaration is removed; one whose
-- definition, cron, zone, payload, catch-up, priority or policy keys changed is updated (a new
-- version, never one the name had: migration 0024); a new one is added (a runtime schedule of the
-- same name is taken over: code wins). A removed schedule's armed fire that has not started is
-- deleted, due or not; one that has started finishes, detached. A changed schedule's armed fire is
-- deleted only if it has not started and is not yet due (run_at > now()). One that has started, or
-- whose instant has passed (owed), stays its fire (job_id kept, next_fire_at null), runs under the
-- old spec and is judged at its claim by the catch-up policy: the schedules pass computes the new
-- next instant after now() and stores it as pending, and that fire's end arms it
-- (docs/schedules.md, "Changes": a schedule never runs two of its own fires at once, and a fire
-- owed is run or recorded skipped, never dropped; test/ledger/schedules.ts, "a change while a fire
-- runs", "a change while the armed fire is due"). Changed schedules with no fire left and
-- added ones are left unarmed for the schedules pass (acta.arm_schedules), which computes their
-- next instant after now(). Paused stays as it was.
-- Definitions without a declared policy (no worker declared one yet) are left alone.
-- Locks: the namespace's schedule rows, in name order; then an armed fire's job row if it has not
-- started, waiting for a claim that holds it (then it has started). Nothing that locks a fire row
-- never claimed waits for a schedule row: no deadlock (a completion holds only Executing rows).
-- Called by acta.refresh_definitions: rare, off the claim and completion paths.
create or replace function acta.reconcile_schedules(p_namespace text, p_names text[])
returns void
language plpgsql as $$
declare
  v_defs    text[];
  v         record;
  v_unarmed integer;
begin
  select array_agg(d.name) into v_defs
  from acta.definitions d
  where d.namespace = p_namespace and d.name = any (p_names) and d.policy is not null;
  if v_defs is null then
    return;
  end if;
  perform 1 from acta.schedules s where s.namespace = p_namespace order by s.name for update;
  for v in
    with desired as (
      select distinct on (x ->> 'name')
             x ->> 'name' as name, d.name as definition, x ->> 'cron' as cron,
             coalesce(x ->> 'timeZone', 'UTC') as time_zone, coalesce(x -> 'payload', 'null'::jsonb) as payload,
             coalesce(x ->> 'catchUp', 'latest') as catch_up, (x ->> 'catchUpWindowMs')::bigint as window_ms,
             coalesce((x ->> 'priority')::integer, 0) as priority,
             x ->> 'concurrencyKey' as concurrency_key, x ->> 'rateKey' as rate_key, x ->> 'lane' as lane
      from acta.definitions d
      cross join lateral jsonb_array_elements(case when jsonb_typeof(d.policy -> 'schedules') = 'array' then d.policy -> 'schedules' else '[]'::jsonb end) as x
      where d.namespace = p_namespace and d.name = any (v_defs)
      -- A name two definitions declare is the newest declaration's: the definition whose applied
      -- policy came from the most recently started worker (registered_at), as a reconcile of that
      -- definition alone gives it (docs/schedules.md, "Declared schedules"); the name breaks a tie.
      order by x ->> 'name', d.registered_at desc, d.name
    )
    select coalesce(ds.name, s.name) as name, s.job_id, s.name is null as added, ds.name is null as dropped,
           ds.definition, ds.cron, ds.time_zone, ds.payload, ds.catch_up, ds.window_ms, ds.priority,
           ds.concurrency_key, ds.rate_key, ds.lane
    from desired ds
    full join (select * from acta.schedules where namespace = p_namespace) s on s.name = ds.name
    where (ds.name is null and s.source = 'declared' and s.definition = any (v_defs))
       or (ds.name is not null and (s.name is null
           or (s.source, s.definition, s.cron, s.time_zone, s.payload, s.catch_up, s.catch_up_window_ms, s.priority, s.concurrency_key, s.rate_key, s.lane)
              is distinct from ('declared', ds.definition, ds.cron, ds.time_zone, ds.payload, ds.catch_up, ds.window_ms, ds.priority,
                                ds.concurrency_key, ds.rate_key, ds.lane)))
    order by 1
  loop
    if v.added then
      insert into acta.schedules (namespace, name, definition, cron, time_zone, payload, catch_up, catch_up_window_ms, priority,
                                  concurrency_key, rate_key, lane, source)
      values (p_namespace, v.name, v.definition, v.cron, v.time_zone, v.payload, v.catch_up, v.window_ms, v.priority,
              v.concurrency_key, v.rate_key, v.lane, 'declared');
      continue;
    end if;
    delete from acta.jobs j
    where j.id = (select f.id from acta.jobs f
                  where f.id = v.job_id and f.status = 'ready' and f.execution = 0 and f.schedule is not null
                    and (v.dropped or f.run_at > now())
                  for update);
    get diagnostics v_unarmed = row_count;
    if v.dropped then
      delete from acta.schedules where namespace = p_namespace and name = v.name;
    else
      update acta.schedules
      set definition = v.definition, cron = v.cron, time_zone = v.time_zone, payload = v.payload,
          catch_up = v.catch_up, catch_up_window_ms = v.window_ms, priority = v.priority,
          concurrency_key = v.concurrency_key, rate_key = v.rate_key, lane = v.lane, source = 'declared',
          version = nextval(pg_get_serial_sequence('acta.schedules', 'version')::regclass),
          job_id = case when v_unarmed > 0 then null else job_id end, next_fire_at = null, updated_at = now()
      where namespace = p_namespace and name = v.name;
    end if;
  end loop;
end
$$;
