-- acta.recover_jobs: the recovery pass of one namespace (DESIGN.md, lease clock; issue 4).
--
-- Contract: every Executing row whose own lease has expired (judged by now(), never by a join to
-- the workers table) goes back to Ready, or to Failed when it would be charged and its attempts
-- are used up (error "worker lost"). The attempt is charged only if it had started, with one
-- bound: a job's uncharged returns are capped at 3, after which every return is charged, so a
-- poison job that kills its worker before the first heartbeat cannot loop forever uncharged.
-- Each returned attempt gets its row in acta.executions (outcome lost | lost_uncharged).
-- Workers silent for longer than p_dead_after_ms are marked dead.
-- Returns the rows it moved: job_id, execution (of the lost attempt), new status, charged.
-- Locks: FOR UPDATE SKIP LOCKED, at most p_limit rows per call; a row being completed right now
-- is skipped and its own write decides it.
create or replace function acta.recover_jobs(
  p_namespace      text,
  p_dead_after_ms  integer,
  p_limit          integer default 10000
) returns table (job_id bigint, execution integer, status text, charged boolean)
language plpgsql as $$
#variable_conflict use_column
begin
  update acta.workers w set status = 'dead'
  where w.namespace = p_namespace and w.status = 'alive'
    and w.last_heartbeat_at < now() - p_dead_after_ms * interval '1 millisecond';

  return query
  with expired as (
    select j.id, j.lease_holder,
           (j.started or j.uncharged_returns >= 3) as charged
    from acta.jobs j
    where j.namespace = p_namespace and j.status = 'executing' and j.lease_expires_at < now()
    order by j.lease_expires_at
    limit p_limit
    for update skip locked
  ),
  returned as (
    update acta.jobs j
    set status = case when e.charged and j.attempts + 1 >= j.max_attempts then 'failed' else 'ready' end,
        attempts = j.attempts + e.charged::integer,
        uncharged_returns = j.uncharged_returns + (not e.charged)::integer,
        error = case when e.charged
                     then jsonb_build_object('name', 'WorkerLost',
                            'message', 'worker lost: the lease expired without a completion',
                            'workerId', e.lease_holder)
                     else j.error end,
        run_at = now(),
        lease_holder = null,
        lease_expires_at = null,
        started = false,
        finished_at = case when e.charged and j.attempts + 1 >= j.max_attempts then now() end
    from expired e
    where j.id = e.id
    returning j.id, j.execution, j.status, j.claimed_at, e.charged, e.lease_holder, j.error
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, outcome, charged, error)
    select r.id, r.execution, r.lease_holder, r.claimed_at,
           case when r.charged then 'lost' else 'lost_uncharged' end, r.charged,
           case when r.charged then r.error end
    from returned r
  )
  select r.id, r.execution, r.status, r.charged from returned r;
end
$$;
