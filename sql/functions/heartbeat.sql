-- acta.heartbeat: renew every lease a worker holds, in one call, and take the namespace's
-- periodic passes that are due (docs/DESIGN.md, "The lease clock").
--
-- Contract: p_ids/p_executions are the (job, execution) pairs in the worker's registry, Claimed
-- ones included; p_started[i] says whether that attempt's handler has started (recovery charges
-- only started attempts). One row per pair: 'renewed' (lease now() + p_lease_ms: re-arm the
-- attempt deadline); 'cancel' (renewed, and a client asked to cancel the job: acta.cancel_job,
-- whose NOTIFY this repeats: abort the handler); 'locked' (another transaction held the row past
-- 100 ms: nothing changed, ask again next beat); 'lost' (the row moved past this attempt: cancel a
-- Claimed or Executing entry, leave a Finalizing one to its write). Plus (null, null, 'pass:' || name) for each of the
-- worker's passes p_passes (intervals p_pass_intervals_ms) this call took (acta.take_passes); and
-- (null, null, 'policy:' || n), the namespace's policy version (acta.namespaces.policy_version: it
-- moves when a definition's policy changes, and the worker then reloads the policies).
-- Stamps the worker's last_heartbeat_at (alive again unless stopped; a dead one's declarations
-- refreshed: acta.refresh_definitions). Lease times come from
-- now(): the database clock. Wakes the namespace's signal waits whose timeout passed (acta.release_waits).
-- Fence: Executing, same execution number, leased to p_worker; a lease that ran out but that no
-- recovery pass has taken yet is still renewed (test/faults/recovery.test.ts).
-- Locks: the worker's row; the pass rows it takes; then, last, FOR UPDATE SKIP LOCKED on the
-- renewed rows, and a wait of at most 100 ms for the rows locked at that moment
-- (docs/decisions/2026-11-30-heartbeat-waits-for-locked-rows.md). Durability: the caller's commit.
-- Plan: as acta.complete_executions, by primary key from `j.id = any (p_ids)` only, one plan per
-- session (test/db/plans.test.ts; docs/decisions/2026-11-30-fenced-writes-plan-settings.md).
drop function if exists acta.heartbeat(uuid, text, bigint[], integer[], boolean[], integer);
create or replace function acta.heartbeat(
  p_worker             uuid,
  p_namespace          text,
  p_ids                bigint[],
  p_executions         integer[],
  p_started            boolean[],
  p_lease_ms           integer,
  p_passes             text[],
  p_pass_intervals_ms  integer[]
) returns table (job_id bigint, execution integer, state text)
language plpgsql
-- One plan per session, from the statement's shape; with sequential scans, plain index scans and
-- nested loops off, the only plan left reaches acta.jobs through `j.id = any (p_ids)`, a bitmap
-- scan of the primary key (docs/decisions/2026-11-30-fenced-writes-plan-settings.md). JIT off:
-- a plan that keeps a type turned off (acta.take_passes' update, called under these settings, on
-- an analyzed one-page acta.passes) is priced past its threshold and was compiled at every beat,
-- while this call held the leases it renewed (docs/decisions/2026-12-07-jit-under-plan-settings.md).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_indexscan = off
set enable_nestloop = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_held    bigint[];
  v_renewed bigint[];
  v_late    bigint[];
  v_cancel  bigint[];
  v_lock_timeout text;
  v_revived text[];
begin
  -- A worker recovery marked dead is alive again: its declarations count again, as at its
  -- registration (acta.refresh_definitions: a stricter limit of its build applies again). Two
  -- probes by key, not a self-join: a join's plan under these SET clauses is priced past JIT's threshold.
  select case when w.status = 'dead' then w.definitions end into v_revived
  from acta.workers w where w.id = p_worker for update;
  update acta.workers set last_heartbeat_at = now(), status = 'alive'
  where id = p_worker and status <> 'stopped';
  if v_revived is not null then
    perform acta.refresh_definitions(p_namespace, v_revived);
  end if;

  -- The namespace's passes that are due (and a shorter interval pulls the next one in); signal
  -- waits whose timeout passed run again (acta.release_waits; docs/workflows.md); the policy
  -- version. All before the renewal: it locks every held row until commit, and the worker's own
  -- completions of those rows wait on it (test/db/passes.test.ts, "a beat holds the leases").
  return query select null::bigint, null::integer, 'pass:' || t.pass
  from acta.take_passes(p_namespace, p_passes, p_pass_intervals_ms) as t(pass);

  perform acta.release_waits(p_namespace);

  return query select null::bigint, null::integer, 'policy:' || n.policy_version
  from acta.namespaces n where n.name = p_namespace;

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
    returning j.id, j.cancel_requested_at is not null as cancel
  )
  select (select coalesce(array_agg(id), '{}') from held), (select coalesce(array_agg(id), '{}') from renewed),
         (select coalesce(array_agg(id), '{}') from renewed where cancel)
    into v_held, v_renewed, v_cancel;

  -- Rows locked at that moment: wait for them, briefly. The holder is usually short: a step record
  -- of the attempt (acta.record_step holds FOR SHARE until it commits), or this worker's own
  -- completion write (after which the row has moved on and is not renewed). Skipped, a job
  -- recording steps back to back would go unrenewed beat after beat until its attempt deadline.
  -- A lock held longer (a stalled write, a recovery pass deciding the row) ends the wait: those
  -- rows stay "locked" (test/faults/recovery.test.ts).
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
        returning j.id, j.cancel_requested_at is not null as cancel
      )
      select v_renewed || coalesce(array_agg(id), '{}'), v_cancel || coalesce(array_agg(id) filter (where cancel), '{}')
        into v_renewed, v_cancel from renewed;
    exception when lock_not_available then
      null; -- still locked after 100 ms: reported "locked", asked again next beat
    end;
    perform set_config('lock_timeout', v_lock_timeout, true);
  end if;

  return query
  select i.id, i.execution,
         case
           when i.id = any (v_cancel) then 'cancel'
           when i.id = any (v_renewed) then 'renewed'
           when i.id = any (v_held) then 'locked'
           else 'lost'
         end
  from unnest(p_ids, p_executions) as i(id, execution);

end
$$;
