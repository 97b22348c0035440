-- acta.complete_executions: write the outcomes of a batch of attempts, of mixed shapes, in one call.
--
-- Contract: parallel arrays, one element per attempt; p_outcomes[i] names the element's shape, and
-- the table `decision` in the body says what each shape does to the job row and its ledger row
-- (a new shape is one row there). Returns one letter per element, in input order: 's' Succeeded,
-- 'f' Failed, 'r' Ready again (a retry, a hand-back), 'x' not applied: stale, or an outcome that
-- names no shape (docs/decisions/2026-12-03-completion-decide-then-apply.md). Arrays in, letters
-- out: docs/decisions/2026-11-30-claim-completion-enqueue-wire-formats.md.
-- Fence: an element is applied only while its row is Executing with the same execution number
-- AND held by p_worker (docs/DESIGN.md, "The ledger"; test/db/fencing.test.ts). The holder keeps
-- the fence for a claim lost in a server crash after its answer (acta.claim_jobs, Durability).
-- Ledger: one acta.executions row per applied element. Wakeup: a row back to Ready sends NOTIFY
-- acta_jobs with the worker's namespace, delivered at commit.
-- Locks: the applied rows, until commit. Durability: the caller's commit, synchronous by default.
-- Plan: one generic plan per session that reaches acta.jobs only through `j.id = any (p_ids)`, a
-- bitmap scan of jobs_pkey hash-joined to the input, never jobs_lease_idx or a table scan, whatever
-- the statistics were when it was planned (test/db/plans.test.ts); see the SET clauses.
-- The shapes this function had before (a row per element; a jsonb batch): dropped. Its own
-- signature is dropped too: 0.1.0 had it with another result type (test/db/migrator.test.ts).
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
-- One plan per session, from the statement's shape: custom plans, made for a session's first five
-- calls, estimated this holder's Executing rows at 1 and read the whole table. With sequential
-- scans, plain index scans and nested loops off, the only plan left reaches acta.jobs through
-- `j.id = any (p_ids)` (docs/decisions/2026-11-30-fenced-writes-plan-settings.md).
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
  -- What each shape does: one row per shape, and for a charged failure one per answer to "was
  -- this the job's last attempt?" (last_attempt; null: either). A job's limit here is its own
  -- max_attempts; a job without one is judged by its definition's limit in the worker, which
  -- sends failed_final instead of failed for the last (migration 0004).
  --   status, answer   the row's next status and the letter returned for it;
  --   charged          the attempt counts against max_attempts (attempts + 1);
  --   uncharged_return uncharged_returns + 1: a claim that reached its worker after its attempt
  --                    deadline, so its handler never ran. The worker sends 'expired' only below
  --                    recovery's bound of 3 (acta.recover_jobs), then a charged failure;
  --   settles          the result is stored and the error cleared (else the element's error,
  --                    if any, replaces the row's; every attempt's error stays in the ledger);
  --   due              run_at: 'kept', 'now', or 'retry' (now() + the element's delay);
  --   finished         finished_at = now() (else null);
  --   recorded_as      the ledger row's outcome;
  --   follows          what else the transition sets off, applied by a statement of its own
  --                    over `done`: nothing yet (to come: wake a parent, hand a lane on, re-arm
  --                    a schedule; docs/DESIGN.md, "Workflows").
  decision (outcome, last_attempt, status, answer, charged, uncharged_return, settles, due, finished, recorded_as, follows) as (
    values ('succeeded',    null::boolean, 'succeeded', 's', true,  false, true,  'kept',  true,  'succeeded',    null::text),
           ('failed',       false,         'ready',     'r', true,  false, false, 'retry', false, 'failed',       null),
           ('failed',       true,          'failed',    'f', true,  false, false, 'kept',  true,  'failed_final', null),
           ('failed_final', null,          'failed',    'f', true,  false, false, 'kept',  true,  'failed_final', null),
           ('handed_back',  null,          'ready',     'r', false, false, false, 'now',   false, 'handed_back',  null),
           ('expired',      null,          'ready',     'r', false, true,  false, 'now',   false, 'expired',      null)
  ),
  -- Applied as decided. Driven from the input by primary key, one probe per element (see Plan).
  -- In SET and WHERE, j.* are the row's values before this update.
  done as (
    update acta.jobs j
    set status = d.status,
        attempts = j.attempts + d.charged::integer,
        uncharged_returns = j.uncharged_returns + d.uncharged_return::integer,
        run_at = case d.due when 'now' then now()
                            when 'retry' then now() + coalesce(i.delay_ms, 0) * interval '1 millisecond'
                            else j.run_at end,
        result = case when d.settles then i.result else j.result end,
        error = case when d.settles then null else coalesce(i.error, j.error) end,
        lease_holder = null,
        lease_expires_at = null,
        started = false,
        finished_at = case when d.finished then now() end
    from input i
    join decision d on d.outcome = i.outcome
    where j.id = any (p_ids) and j.id = i.id and j.execution = i.execution and j.status = 'executing' and j.lease_holder = p_worker
      and (d.last_attempt is null or d.last_attempt = (j.max_attempts is not null and j.attempts + 1 >= j.max_attempts))
    returning j.id, j.execution, j.claimed_at, i.error, d.answer, d.charged, d.recorded_as
  ),
  ledger as (
    insert into acta.executions (job_id, execution, worker_id, claimed_at, outcome, charged, error)
    select d.id, d.execution, p_worker, d.claimed_at, d.recorded_as, d.charged, d.error
    from done d
  )
  select string_agg(coalesce(d.answer, 'x'), '' order by i.ord)
    into v_answer
  from input i
  left join done d on d.id = i.id and d.execution = i.execution;
  -- Rows back to Ready (a hand-back, a retry) wake the namespace's idle workers, as an enqueue
  -- does; a woken worker sleeps until a retry that is due later. Nothing to do for successes.
  if strpos(v_answer, 'r') > 0 then
    perform pg_notify('acta_jobs', w.namespace) from acta.workers w where w.id = p_worker;
  end if;
  return coalesce(v_answer, '');
end
$$;
