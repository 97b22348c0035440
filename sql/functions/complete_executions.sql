-- acta.complete_executions: write the outcomes of a batch of attempts, of mixed shapes, in one call.
--
-- Contract: parallel arrays, one element per attempt. p_outcomes[i] is one of
--   succeeded    -> Succeeded, result stored, attempt charged;
--   failed       -> Ready again at now() + p_retry_delays_ms[i] while attempts remain, else
--                   Failed; attempt charged; error stored. Attempts remain by the job's own
--                   max_attempts; when it has none, by its definition's, which the worker
--                   applied in choosing 'failed' over 'failed_final' (migration 0004);
--   failed_final -> Failed without further attempts (e.g. a result that cannot be stored);
--   handed_back  -> Ready at now(), attempt NOT charged (graceful shutdown, DESIGN.md delivery).
--   expired      -> Ready at now(), attempt NOT charged, uncharged_returns + 1: the claim reached
--                   the worker after its attempt deadline, so its handler never ran. The worker
--                   sends it only while uncharged_returns (from the claim) is below 3, the bound
--                   acta.recover_jobs applies to lost unstarted attempts; from then on it sends a
--                   charged failure (ClaimExpiredError) instead, so a claim too slow to arrive in time
--                   (a huge payload at a short H) cannot loop forever uncharged.
-- Fence: an element is applied only if its row is still Executing with the same execution
-- number AND held by p_worker; otherwise it changes nothing and is answered 'x' (stale).
-- (The holder check makes the fence hold even for a claim the server lost in a crash after
-- answering it: a later claim of the row reuses that execution number, never the holder.)
-- Returns one character per element, in input order: the row's new status, 's' Succeeded,
-- 'f' Failed, 'r' Ready (a retry or a hand-back), or 'x' stale. One text rather than a row per
-- element (issue 5, 128-row batches, timed in the server and in the client): 12.1 against 13.6 us
-- of server CPU per element, 0.6 against 1.5-2.0 us of client CPU. (Tried and dropped: the batch as
-- one jsonb instead of the arrays saved the client 0.6 us per element and cost the server 2.2.)
-- Ledger: each applied element inserts its attempt's row into acta.executions.
-- Wakeup: when a row went back to Ready, NOTIFY acta_jobs with the worker's namespace.
-- Locks: row locks on the applied rows for the rest of the transaction.
-- Plan: the rows are found through the primary key from p_ids (a bitmap scan for `j.id = any
-- (p_ids)`), hash-joined to the input. jobs_lease_idx, which holds every Executing row of the fleet,
-- is out of this statement's reach by its predicate (migration 0002). The plan is made once per
-- session (plan_cache_mode below), so it must be right whatever acta.jobs held then: planned on a
-- few analyzed rows, the update read the whole table for its rows (sequential scans are now off),
-- then the whole primary key in key order, which stands in for a table scan (20,011 entries per
-- 1-row call at 20,010 rows; 8-row claim + completion 491,000 -> 299,000 server instructions per
-- job at 810 rows, bench/server-instructions.sh; test/db/plans.test.ts). With plain index scans and
-- nested loops off as well, every plan left reaches acta.jobs only through `j.id = any (p_ids)`.
-- (Nested loops off also keeps out the plan that made `j.id = any (p_ids)` look like no help
-- before: the input rescanned for each row, 128 x 128 comparisons per call; the in-server drain
-- fell from 54k to 24k jobs/s.)
-- The shapes this function had before (a row per element; a jsonb batch, never released): dropped.
drop function if exists acta.complete_executions(uuid, jsonb);
drop function if exists acta.complete_executions(uuid, bigint[], integer[], text[], jsonb[], jsonb[], integer[]);
create or replace function acta.complete_executions(
  p_worker          uuid,
  p_ids             bigint[],
  p_executions      integer[],
  p_outcomes        text[],
  p_results         jsonb[],
  p_errors          jsonb[],
  p_retry_delays_ms integer[]
) returns text
language plpgsql
-- Plan once per session, from the statement's shape: by primary key from the input (see Plan).
-- A custom plan, made per call for a session's first five calls, saw this holder's Executing rows
-- estimated at 1 and read the whole table instead: 10-25 ms per 128-row call against 1.5 on a
-- fresh 20,000-row table, on every new connection (issue 5).
-- Sequential scans, plain index scans and nested loops off while it runs: see Plan.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_indexscan = off
set enable_nestloop = off
as $$
#variable_conflict use_column
declare
  v_answer text;
begin
  with input as (
    select u.*
    from unnest(p_ids, p_executions, p_outcomes, p_results, p_errors, p_retry_delays_ms)
      with ordinality as u(id, execution, outcome, result, error, delay_ms, ord)
  ),
  -- Driven from the input by primary key, one probe per element: never through the Executing
  -- rows of the whole fleet (see Plan). In SET, j.* are the row's values before this update.
  done as (
    update acta.jobs j
    set status = case
                   when i.outcome = 'succeeded' then 'succeeded'
                   when i.outcome in ('handed_back', 'expired') then 'ready'
                   when i.outcome = 'failed' and (j.max_attempts is null or j.attempts + 1 < j.max_attempts) then 'ready'
                   else 'failed'
                 end,
        attempts = j.attempts + case when i.outcome in ('handed_back', 'expired') then 0 else 1 end,
        uncharged_returns = j.uncharged_returns + (i.outcome = 'expired')::integer,
        run_at = case
                   when i.outcome in ('handed_back', 'expired') then now()
                   when i.outcome = 'failed' and (j.max_attempts is null or j.attempts + 1 < j.max_attempts)
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
    where j.id = any (p_ids) and j.id = i.id and j.execution = i.execution and j.status = 'executing' and j.lease_holder = p_worker
    returning j.id, j.execution, j.status, j.claimed_at, i.outcome, i.error
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, outcome, charged, error)
    select d.id, d.execution, p_worker, d.claimed_at,
           case when d.outcome = 'failed' and d.status = 'failed' then 'failed_final' else d.outcome end,
           d.outcome not in ('handed_back', 'expired'), d.error
    from done d
  )
  select string_agg(case d.status when 'succeeded' then 's' when 'failed' then 'f'
                                  when 'ready' then 'r' else 'x' end, '' order by i.ord)
    into v_answer
  from input i
  left join done d on d.id = i.id and d.execution = i.execution;
  -- Rows back to Ready (a hand-back, a retry) wake the namespace's idle workers, as an enqueue
  -- does: a graceful shutdown's hand-backs reached an idle peer only by its poll (up to 1 s). A
  -- retry due later makes a woken worker sleep until it. Nothing to do for a batch of successes.
  if strpos(v_answer, 'r') > 0 then
    perform pg_notify('acta_jobs', w.namespace) from acta.workers w where w.id = p_worker;
  end if;
  return coalesce(v_answer, '');
end
$$;
