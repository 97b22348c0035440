-- acta.recover_jobs: the recovery pass of one namespace (shared/DESIGN.md, "The lease clock" and
-- "Delivery"; issue 4). Run by the worker whose heartbeat took the pass (acta.heartbeat).
--
-- Contract: every Executing row whose OWN lease has expired (lease_expires_at < now(), the
-- database clock; never judged by a join to the workers table) goes back to Ready at now(), or
-- to Failed when the return is charged and the job's attempts are then used up (error
-- {"name": "WorkerLost", "message": "worker lost: ..."}), so nothing stays Executing forever.
-- Charging: a return is charged (attempts + 1) only if the attempt had started (a heartbeat
-- reported its handler running, or it recorded a step: acta.record_step). Bound on uncharged returns: a job goes back uncharged at most
-- 3 times in its life (jobs.uncharged_returns); from the 4th return on, every return is charged
-- whether or not a start was reported, so a poison job that kills its worker before the first
-- heartbeat cannot loop forever uncharged: it ends Failed within max_attempts + 3 recoveries.
-- Hand-backs by a live worker (graceful shutdown) go through complete_executions and do not
-- count against the bound; a claim that reached its worker after the attempt deadline does
-- ('expired', complete_executions: the worker applies the same bound, PIPELINE.unchargedReturnsMax).
-- Ledger: each returned attempt gets its row in acta.executions (outcome 'lost', charged, with
-- the WorkerLost error; or 'lost_uncharged'), with the worker that held the lease.
-- Attempts: a job's limit is its own max_attempts, else its definition's in acta.definitions (as
-- the newest live worker running it declared it: acta.refresh_definitions), else 25 (migration
-- 0004, PIPELINE.maxAttempts).
-- Workers: alive workers silent for longer than p_dead_after_ms (7 H) are marked dead. That is
-- bookkeeping only: rows are returned by their own lease, whatever their holder's status. (It
-- also hands their definitions' policies back to the live workers: acta.refresh_definitions.)
-- Returns the rows it moved: job_id, execution (of the lost attempt), new status, charged.
-- Locks: FOR UPDATE SKIP LOCKED, at most p_limit rows per call (the caller repeats while a call
-- returns p_limit rows); a row whose holder is renewing or completing it right now is skipped
-- and decided by that write.
-- Plan: the expired rows through jobs_lease_idx (partial: Executing rows only), in lease order;
-- then the update by primary key from their ids (`j.id = any (...)`, no join to acta.jobs), the
-- ledger and the answer from the two CTEs' own rows. Sequential scans are off: a session plans
-- this once, and planned while acta.jobs held a few analyzed rows, the pass read the whole table
-- twice (the pick, and the update's join to it: 40,020 rows per pass at 20,010 rows), and went on
-- doing so as the table grew, until an ANALYZE replanned it (test/db/plans.test.ts).
create or replace function acta.recover_jobs(
  p_namespace      text,
  p_dead_after_ms  integer,
  p_limit          integer default 10000
) returns table (job_id bigint, execution integer, status text, charged boolean)
language plpgsql
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_dead_definitions text[];
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
    perform acta.refresh_definitions(p_namespace, v_dead_definitions);
  end if;

  return query
  with expired as (
    select j.id, j.lease_holder, (j.started or j.uncharged_returns >= 3) as charged
    from acta.jobs j
    where j.namespace = p_namespace and j.status = 'executing' and j.lease_expires_at < now()
    order by j.lease_expires_at
    limit p_limit
    for update skip locked
  ),
  returned as (
    -- In SET, j.* are the row's values as the pick locked them, so `charged` is expired's. A
    -- job's limit is its own, else its definition's, else 25 (see Attempts).
    update acta.jobs j
    set (status, attempts, uncharged_returns, error, finished_at) = (
          select case when c.charged and j.attempts + 1 >= c.max_attempts then 'failed' else 'ready' end,
                 j.attempts + c.charged::integer,
                 j.uncharged_returns + (not c.charged)::integer,
                 case when c.charged
                      then jsonb_build_object('name', 'WorkerLost',
                             'message', 'worker lost: the lease expired without a completion',
                             'workerId', j.lease_holder)
                      else j.error end,
                 case when c.charged and j.attempts + 1 >= c.max_attempts then now() end
          from (select j.started or j.uncharged_returns >= 3 as charged,
                       coalesce(j.max_attempts,
                                (select d.max_attempts from acta.definitions d
                                 where d.namespace = j.namespace and d.name = j.definition),
                                25) as max_attempts) c),
        run_at = now(),
        lease_holder = null,
        lease_expires_at = null,
        started = false
    where j.id = any (array(select e.id from expired e))
    returning j.id, j.execution, j.status, j.claimed_at, j.error
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, outcome, charged, error)
    select r.id, r.execution, e.lease_holder, r.claimed_at,
           case when e.charged then 'lost' else 'lost_uncharged' end, e.charged,
           case when e.charged then r.error end
    from returned r join expired e on e.id = r.id
  )
  select r.id, r.execution, r.status, e.charged from returned r join expired e on e.id = r.id;
end
$$;
