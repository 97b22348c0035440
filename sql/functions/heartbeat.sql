-- acta.heartbeat: renew every lease a worker holds, in one call, and take the namespace's
-- recovery pass when it is due (shared/DESIGN.md, "The lease clock"; issue 4).
--
-- Contract: p_ids/p_executions are the (job, execution) pairs in the worker's registry, Claimed
-- ones included (no row waiting in a worker's buffer may lose its lease); p_started[i] says
-- whether that attempt's handler has started (recovery charges only started attempts). Returns
-- one row per pair with state
--   renewed -> lease_expires_at = now() + p_lease_ms (the caller re-arms the attempt deadline);
--   locked  -> the row matches the fence but another transaction held its lock for longer than
--              100 ms (e.g. a stalled completion write of this worker, a recovery pass deciding
--              it): nothing changed, the caller keeps the deadline and asks again next beat;
--   lost    -> the row has moved past this attempt (recovered, completed, fenced): the caller
--              cancels a Claimed or Executing entry and leaves a Finalizing one to its write.
-- plus, when this call took the namespace's recovery pass (acta.take_recovery_pass: exactly one
-- worker takes each pass; with mixed leases in one namespace, every shortest lease), one row
-- (null, null, 'recovery_due').
-- Fence: a pair is renewed only while its row is Executing with the same execution number AND
-- is leased to p_worker. A row whose lease already ran out but that no recovery pass has taken
-- yet is still this worker's and is renewed. Lease times come from now(): the database clock.
-- Also stamps the worker's last_heartbeat_at (marking it alive again after a stall, unless it
-- stopped). Locks: the worker's row; FOR UPDATE SKIP LOCKED on the renewed rows, then, for rows
-- locked at that moment, a wait of at most 100 ms each (lock_timeout; the first timeout ends it);
-- the namespace row when the pass is due.
create or replace function acta.heartbeat(
  p_worker     uuid,
  p_namespace  text,
  p_ids        bigint[],
  p_executions integer[],
  p_started    boolean[],
  p_lease_ms   integer
) returns table (job_id bigint, execution integer, state text)
language plpgsql
-- Plan once per session, from the statement's shape: the held rows by primary key from the input.
-- A custom plan, made per call for a session's first five calls, estimated this holder's
-- Executing rows at 1 and read the whole table for 128 pairs (test/db/plans.test.ts; issue 5).
-- Sequential scans, plain index scans and nested loops off while it runs: that one plan, made while
-- acta.jobs held a few analyzed rows, read the whole table to find its rows, and with sequential
-- scans off the whole primary key in key order (40,026 entries per 1-row call at 20,010 rows), and
-- went on doing so as the table grew, until an ANALYZE replanned it (test/db/plans.test.ts). Each
-- statement reaches acta.jobs through `j.id = any (p_ids)` (a bitmap scan of the primary key), the
-- only plan left (as in acta.complete_executions, "Plan").
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_indexscan = off
set enable_nestloop = off
as $$
#variable_conflict use_column
declare
  v_held    bigint[];
  v_renewed bigint[];
  v_late    bigint[];
  v_lock_timeout text;
begin
  update acta.workers set last_heartbeat_at = now(), status = 'alive'
  where id = p_worker and status <> 'stopped';

  -- Renew every held row nobody else has locked.
  with input as (
    select * from unnest(p_ids, p_executions, p_started) as u(id, execution, started)
  ),
  held as (
    select j.id
    from acta.jobs j
    join input i on i.id = j.id and i.execution = j.execution
    where j.id = any (p_ids) and j.status = 'executing' and j.lease_holder = p_worker
  ),
  lockable as (
    select j.id
    from acta.jobs j
    where j.id = any (p_ids) and j.id in (select id from held) and j.status = 'executing' and j.lease_holder = p_worker
    for update skip locked
  ),
  renewed as (
    update acta.jobs j
    set lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
        started = j.started or i.started
    from lockable l, input i
    where j.id = any (p_ids) and j.id = l.id and i.id = l.id
    returning j.id
  )
  select (select coalesce(array_agg(id), '{}') from held), (select coalesce(array_agg(id), '{}') from renewed)
    into v_held, v_renewed;

  -- Rows locked at that moment: wait for them, briefly. The holder is usually short: a step record
  -- of the attempt (acta.record_step holds FOR SHARE until it commits), or this worker's own
  -- completion write (after which the row has moved on and is not renewed). Skipping them as
  -- before left a job recording steps back to back unrenewed beat after beat until its attempt
  -- deadline passed (adversarial trial: 3 of 3 runs failed at H = 0.5 s). A lock held longer (a
  -- stalled write, a recovery pass deciding the row) ends the wait: those rows stay "locked".
  v_late := array(select unnest(v_held) except select unnest(v_renewed));
  if cardinality(v_late) > 0 then
    v_lock_timeout := current_setting('lock_timeout');
    perform set_config('lock_timeout', '100ms', true);
    begin
      with input as (
        select * from unnest(p_ids, p_executions, p_started) as u(id, execution, started)
      ),
      renewed as (
        update acta.jobs j
        set lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
            started = j.started or i.started
        from input i
        where j.id = any (v_late) and j.id = i.id and j.execution = i.execution
          and j.status = 'executing' and j.lease_holder = p_worker
        returning j.id
      )
      select v_renewed || coalesce(array_agg(id), '{}') into v_renewed from renewed;
    exception when lock_not_available then
      null; -- still locked after 100 ms: reported "locked", asked again next beat
    end;
    perform set_config('lock_timeout', v_lock_timeout, true);
  end if;

  return query
  select i.id, i.execution,
         case
           when i.id = any (v_renewed) then 'renewed'
           when i.id = any (v_held) then 'locked'
           else 'lost'
         end
  from unnest(p_ids, p_executions) as i(id, execution);

  -- The namespace's recovery pass, when it is due (and a shorter lease pulls the next one in).
  if acta.take_recovery_pass(p_namespace, p_lease_ms) then
    return query select null::bigint, null::integer, 'recovery_due'::text;
  end if;
end
$$;
