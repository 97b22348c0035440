-- acta.recover_jobs: the recovery pass of one namespace (docs/DESIGN.md, "The lease clock" and
-- "Delivery"), run by the worker whose heartbeat or registration took the pass.
--
-- Contract: every Executing row whose OWN lease has expired (never judged by its holder's status)
-- goes back to Ready; to Failed when a charged return uses up its attempts (error WorkerLost); to
-- Cancelled when its cancel was requested while it ran (acta.cancel_job). A return is charged only
-- if the attempt had started (a heartbeat reported its handler, or it recorded a step), or once the
-- job has gone back uncharged 3 times (PIPELINE.unchargedReturnsMax): a poison job that kills its
-- worker before its first beat ends Failed within max_attempts + 3 returns
-- (test/faults/recovery.test.ts). A job's limit: its own max_attempts, else its definition's, else
-- 25. Each returned attempt gets its acta.executions row ('lost', charged, with the error; or
-- 'lost_uncharged'). Workers silent for longer than p_dead_after_ms are marked dead, their policies
-- given back to the live workers (acta.refresh_definitions; a changed policy reaches the rows parked
-- under the old one: acta.recheck_gates, last). Returns job_id, execution, new status, charged.
-- Hand-on, as acta.complete_executions': a returned row frees its key's slot; a lane head that
-- ended Failed or Cancelled hands its lane on (acta.release_gate; NOTIFY acta_jobs when one does).
-- Fence: the returned row is no longer Executing under its holder, so the lost attempt's later
-- writes are stale (test/db/fencing.test.ts). Durability: the caller's commit. Time: one clock read
-- once the returned rows are locked (docs/decisions/2026-12-05-ledger-times.md).
-- Locks: FOR UPDATE SKIP LOCKED, at most p_limit rows per call (the caller repeats while a call
-- returns p_limit rows); then the returned rows' gates in increasing order (acta.gate_lock); last,
-- when a dead worker's declarations changed a policy, gate rows (acta.recheck_gates).
-- Plan: the expired rows through jobs_lease_idx in lease order, then by primary key from their
-- ids; no sequential scans (test/db/plans.test.ts).
create or replace function acta.recover_jobs(
  p_namespace      text,
  p_dead_after_ms  integer,
  p_limit          integer default 10000
) returns table (job_id bigint, execution integer, status text, charged boolean)
language plpgsql
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_dead_definitions text[];
  v_version  bigint;
  v_ids      bigint[];
  v_execs    integer[];
  v_statuses text[];
  v_charged  boolean[];
  v_gate_kinds text[];
  v_gate_keys  text[];
  v_gate     record;
  v_released boolean := false;
  v_parents  bigint[];
  v_parent_failed boolean[];
begin
  with dead as (
    update acta.workers w set status = 'dead'
    where w.namespace = p_namespace and w.status = 'alive'
      and w.last_heartbeat_at < now() - p_dead_after_ms * interval '1 millisecond'
    returning w.definitions
  )
  select array_agg(distinct x.name) into v_dead_definitions
  from dead d cross join lateral unnest(d.definitions) as x(name);
  -- A dead worker's declarations give way to the live workers' (acta.refresh_definitions).
  if v_dead_definitions is not null then
    select n.policy_version into v_version from acta.namespaces n where n.name = p_namespace;
    perform acta.refresh_definitions(p_namespace, v_dead_definitions);
  end if;

  with expired as (
    select j.id, j.lease_holder, (j.started or j.uncharged_returns >= 3) as charged
    from acta.jobs j
    where j.namespace = p_namespace and j.status = 'executing' and j.lease_expires_at < now()
    order by j.lease_expires_at
    limit p_limit
    for update skip locked
  ),
  -- The clock, read once, after every returned row is locked: counting `expired` takes all of it.
  ended as materialized (
    select clock_timestamp() as at from (select count(*) from expired) n
  ),
  returned as (
    -- In SET, j.* are the row's values as the pick locked them, so `charged` is expired's. A
    -- job's limit is its own, else its definition's, else 25 (see Contract).
    update acta.jobs j
    set (status, attempts, uncharged_returns, error, finished_at) = (
          select case when j.cancel_requested_at is not null then 'cancelled'
                      when c.charged and j.attempts + 1 >= c.max_attempts then 'failed' else 'ready' end,
                 j.attempts + c.charged::integer,
                 j.uncharged_returns + (not c.charged)::integer,
                 case when c.charged
                      then jsonb_build_object('name', 'WorkerLost',
                             'message', 'worker lost: the lease expired without a completion',
                             'workerId', j.lease_holder)
                      else j.error end,
                 case when j.cancel_requested_at is not null or (c.charged and j.attempts + 1 >= c.max_attempts) then (select e.at from ended e) end
          from (select j.started or j.uncharged_returns >= 3 as charged,
                       coalesce(j.max_attempts,
                                (select d.max_attempts from acta.definitions d
                                 where d.namespace = j.namespace and d.name = j.definition),
                                25) as max_attempts) c),
        run_at = (select e.at from ended e),
        lease_holder = null,
        lease_expires_at = null,
        started = false
    where j.id = any (array(select e.id from expired e))
    returning j.id, j.execution, j.status, j.claimed_at, j.error, j.concurrency_key, j.lane, j.parent_id, j.fail_parent
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, finished_at, outcome, charged, error)
    select r.id, r.execution, e.lease_holder, r.claimed_at, (select t.at from ended t),
           case when e.charged then 'lost' else 'lost_uncharged' end, e.charged,
           case when e.charged then r.error end
    from returned r join expired e on e.id = r.id
  ),
  gates as (
    select distinct g.kind, g.key, acta.gate_lock(p_namespace, g.kind, g.key) as lock
    from returned r
    cross join lateral (values ('concurrency', r.concurrency_key), ('lane', case when r.status in ('failed', 'cancelled') then r.lane end)) as g(kind, key)
    where g.key is not null
  )
  select array_agg(r.id), array_agg(r.execution), array_agg(r.status), array_agg(e.charged),
         (select array_agg(g.kind order by g.lock) from gates g), (select array_agg(g.key order by g.lock) from gates g),
         array_agg(r.parent_id order by r.parent_id) filter (where r.parent_id is not null and r.status in ('failed', 'cancelled')),
         array_agg(coalesce(r.fail_parent, false) order by r.parent_id) filter (where r.parent_id is not null and r.status in ('failed', 'cancelled'))
    into v_ids, v_execs, v_statuses, v_charged, v_gate_kinds, v_gate_keys, v_parents, v_parent_failed
  from returned r join expired e on e.id = r.id;
  -- A child that ended here (failed for good, cancelled) tells its parent (acta.tell_parents).
  if v_parents is not null then
    perform acta.tell_parents(v_parents, v_parent_failed);
  end if;

  for v_gate in select g.kind, g.key from unnest(v_gate_kinds, v_gate_keys) with ordinality as g(kind, key, ord) order by g.ord loop
    perform pg_advisory_xact_lock(acta.gate_lock(p_namespace, v_gate.kind, v_gate.key));
    if v_gate.kind = 'lane' or exists (select 1 from acta.gates x where x.namespace = p_namespace and x.kind = v_gate.kind and x.key = v_gate.key) then
      if acta.release_gate(p_namespace, v_gate.kind, v_gate.key) > 0 then
        v_released := true;
      end if;
    end if;
  end loop;
  if v_released then
    perform pg_notify('acta_jobs', p_namespace);
  end if;
  if v_dead_definitions is not null
     and exists (select 1 from acta.namespaces n where n.name = p_namespace and n.policy_version is distinct from v_version) then
    perform acta.recheck_gates(p_namespace, v_dead_definitions);
  end if;
  return query select * from unnest(v_ids, v_execs, v_statuses, v_charged);
end
$$;
