-- acta.complete_executions: write the outcomes of a batch of attempts, of mixed shapes, in one call.
--
-- Contract: parallel arrays, one element per attempt. p_outcomes[i] is one of
--   succeeded    -> Succeeded, result stored, attempt charged;
--   failed       -> Ready again at now() + p_retry_delays_ms[i] while attempts remain, else
--                   Failed; attempt charged; error stored;
--   failed_final -> Failed without further attempts (e.g. a result that cannot be stored);
--   handed_back  -> Ready at now(), attempt NOT charged (graceful shutdown, DESIGN.md delivery).
-- Fence: an element is applied only if its row is still Executing with the same execution
-- number AND held by p_worker; otherwise it changes nothing and comes back with status 'stale'.
-- (The holder check makes the fence hold even for a claim the server lost in a crash after
-- answering it: a later claim of the row reuses that execution number, never the holder.)
-- Returns one row per element: job_id, execution, and the row's new status or 'stale'.
-- Ledger: each applied element inserts its attempt's row into acta.executions.
-- Locks: row locks on the applied rows for the rest of the transaction.
-- Plan: the rows are found by primary key from the input. jobs_lease_idx, which holds every
-- Executing row of the fleet, is out of this statement's reach by its predicate (migration 0002).
-- (Adding `j.id = any (p_ids)` looks like help but is not: plpgsql's generic plan then joined the
-- input in a nested loop, 128 x 128 comparisons per call, and the in-server drain fell from 54k to
-- 24k jobs/s.)
create or replace function acta.complete_executions(
  p_worker          uuid,
  p_ids             bigint[],
  p_executions      integer[],
  p_outcomes        text[],
  p_results         jsonb[],
  p_errors          jsonb[],
  p_retry_delays_ms integer[]
) returns table (job_id bigint, execution integer, status text)
language plpgsql as $$
#variable_conflict use_column
begin
  return query
  with input as (
    select u.*
    from unnest(p_ids, p_executions, p_outcomes, p_results, p_errors, p_retry_delays_ms)
      as u(id, execution, outcome, result, error, delay_ms)
  ),
  -- Driven from the input by primary key, one probe per element: never through the Executing
  -- rows of the whole fleet (see Plan). In SET, j.* are the row's values before this update.
  done as (
    update acta.jobs j
    set status = case
                   when i.outcome = 'succeeded' then 'succeeded'
                   when i.outcome = 'handed_back' then 'ready'
                   when i.outcome = 'failed' and j.attempts + 1 < j.max_attempts then 'ready'
                   else 'failed'
                 end,
        attempts = j.attempts + case when i.outcome = 'handed_back' then 0 else 1 end,
        run_at = case
                   when i.outcome = 'handed_back' then now()
                   when i.outcome = 'failed' and j.attempts + 1 < j.max_attempts
                     then now() + coalesce(i.delay_ms, 0) * interval '1 millisecond'
                   else j.run_at
                 end,
        result = case when i.outcome = 'succeeded' then i.result else j.result end,
        -- A success clears the last failure's error (every attempt's error stays in acta.executions).
        error = case when i.outcome = 'succeeded' then null else coalesce(i.error, j.error) end,
        lease_holder = null,
        lease_expires_at = null,
        started = false,
        finished_at = case
                        when i.outcome in ('succeeded', 'failed_final') then now()
                        when i.outcome = 'failed' and j.attempts + 1 >= j.max_attempts then now()
                      end
    from input i
    where j.id = i.id and j.execution = i.execution and j.status = 'executing' and j.lease_holder = p_worker
    returning j.id, j.execution, j.status, j.claimed_at, i.outcome, i.error
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, outcome, charged, error)
    select d.id, d.execution, p_worker, d.claimed_at,
           case when d.outcome = 'failed' and d.status = 'failed' then 'failed_final' else d.outcome end,
           d.outcome <> 'handed_back', d.error
    from done d
  )
  select i.id, i.execution, coalesce(d.status, 'stale')
  from input i
  left join done d on d.id = i.id and d.execution = i.execution;
end
$$;
