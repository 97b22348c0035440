-- acta.claim_jobs: claim up to p_limit due rows of the given definitions for one worker.
--
-- Contract: each claimed row goes straight to Executing (the claim starts the execution), its
-- execution number (the fence) + 1, its lease now() + p_lease_ms, its holder p_worker; returned
-- in claim order: priority, due time, id (docs/DESIGN.md, "Policies"). Nothing claimable: one row
-- with a null job_id and next_due_in_ms, the time until the earliest later row of these
-- definitions is due (null: none), on the database clock. own_max_attempts is the job's own limit
-- (null: its definition's); max_attempts is coalesce(own, 25), read by workers from before
-- migration 0004 (test/db/migrator.test.ts). Fence: the execution number and the holder.
-- Durability: asynchronous commit, this transaction only: a claim lost in a crash is a crash
-- right after it (docs/DESIGN.md, "The ledger"; why that is safe:
-- docs/decisions/2026-11-30-claim-commits-asynchronously.md).
-- Locks: FOR UPDATE SKIP LOCKED on the rows picked: claimers never wait on or double-take a row.
-- Plan: per definition along jobs_due_idx, jobs_claim_idx only if due rows mix priorities, both
-- led by the queue's key (migration 0006; each query checks namespace and definition on every
-- row: test/db/core.test.ts); one plan per session whatever the statistics
-- (test/db/plans.test.ts). Why: docs/decisions/2026-12-01-claim-queue-key.md and
-- docs/decisions/2026-11-30-claim-per-definition-along-the-due-index.md.
-- Earlier shapes had other result types, which CREATE OR REPLACE cannot change: hence the drop.
drop function if exists acta.claim_jobs(text, uuid, text[], integer, integer);
create or replace function acta.claim_jobs(
  p_namespace   text,
  p_worker      uuid,
  p_definitions text[],
  p_limit       integer,
  p_lease_ms    integer
) returns table (
  job_id          bigint,
  definition      text,
  payload         jsonb,
  execution       integer,
  attempts        integer,
  max_attempts    integer,
  own_max_attempts integer,
  uncharged_returns integer,
  priority        integer,
  next_due_in_ms  double precision
)
language plpgsql
-- STRICT: a call with any null argument claims nothing and returns no row, at no cost per call. A
-- null limit would otherwise be no LIMIT at all (every due row claimed), and a null lease a row
-- Executing with no lease, which recovery never takes back if its worker dies (SQL callers; the
-- worker passes every argument; test/db/fencing.test.ts).
strict
-- One plan per session; no sort, no JIT, no sequential scan, for the whole call (the idle probe
-- included): each kept a plan made on unfit statistics or a small table from going by the
-- indexes (docs/decisions/2026-11-30-claim-plan-settings.md). Put back at the function's exit.
set plan_cache_mode = force_generic_plan
set enable_sort = off
set jit = off
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_claimed     boolean;
  v_ids         bigint[];
  v_min_priority integer;
  v_max_priority integer;
  v_locked      integer;
  v_locked_ids  bigint[];
begin
  -- A limit below 1 would claim nothing and answer "nothing due" although rows are (0), or fail
  -- deep in the plan (a negative one): refused plainly (SQL callers; test/db/core.test.ts).
  if p_limit < 1 then
    raise exception 'acta.claim_jobs: p_limit must be at least 1, got %', p_limit using errcode = '22023';
  end if;
  -- This transaction only (see Durability); a SET clause would be put back before its commit.
  perform set_config('synchronous_commit', 'off', true);
  -- Each name once: the pick runs per name, and a second pass over a name sees the rows this
  -- transaction has just locked (SKIP LOCKED skips only other transactions' locks), so a name
  -- given twice brought the claim back short (SQL callers, test/db/core.test.ts; the worker
  -- refuses duplicate names).
  -- One definition, the worker's usual case, costs only the test.
  if cardinality(p_definitions) > 1 then
    p_definitions := array(select distinct u.name from unnest(p_definitions) as u(name));
  end if;
  -- Per definition, its first p_limit unlocked rows due now in due order, along jobs_due_idx (see
  -- Plan), locked; in claim order.
  select coalesce(array_agg(a.id order by a.priority desc, a.run_at, a.id), '{}'),
         coalesce(min(a.priority), 0), coalesce(max(a.priority), 0)
    into v_ids, v_min_priority, v_max_priority
  from unnest(p_definitions) as d(name)
  cross join lateral (
    select j.id, j.priority, j.run_at
    from acta.jobs j
    where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
      and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready' and j.run_at <= now()
    order by j.run_at, j.id
    limit p_limit
    for update skip locked
  ) a;
  v_locked := cardinality(v_ids);
  if v_locked >= p_limit then
    -- Perhaps more due than this claim takes. These are the first in claim order if they share one
    -- priority and no due row has a higher one: any other due row comes later in due order, or has
    -- a lower priority. Otherwise walk jobs_claim_idx in claim order (rows due later at a higher
    -- priority are walked there); the rows locked above and not taken are free again at commit.
    if v_min_priority = v_max_priority and not exists (
      select 1
      from unnest(p_definitions) as d(name)
      cross join lateral (
        select 1
        from acta.jobs j
        where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
          and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
          and j.priority > v_max_priority and j.run_at <= now()
        -- Along jobs_claim_idx, the range above v_max_priority (usually empty). Without the order,
        -- a plan made without statistics reads the due backlog along jobs_due_idx instead,
        -- filtering on priority.
        order by j.priority desc, j.run_at, j.id
        limit 1
      ) higher
    ) then
      v_ids := v_ids[1:p_limit]; -- D definitions gave up to D x p_limit
    else
      v_locked_ids := v_ids;
      v_ids := array(
        select b.id
        from unnest(p_definitions) as d(name)
        cross join lateral (
          select j.id, j.priority, j.run_at
          from acta.jobs j
          where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
            and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready' and j.run_at <= now()
          order by j.priority desc, j.run_at, j.id
          limit p_limit
          for update skip locked
        ) b
        order by b.priority desc, b.run_at, b.id
        limit p_limit);
    end if;
  end if;

  if cardinality(v_ids) > 0 then
    return query
    with claimed as (
      -- By primary key from the locked ids (an array, not a join: with statistics the planner
      -- joined the picked rows against a scan of the whole table).
      update acta.jobs j
      set status = 'executing',
          execution = j.execution + 1,
          lease_holder = p_worker,
          lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
          claimed_at = now(),
          started = false
      where j.id = any (v_ids)
      returning j.id, j.definition, j.payload, j.execution, j.attempts, j.max_attempts, j.uncharged_returns, j.priority, j.run_at
    )
    -- UPDATE ... RETURNING has no order of its own: restore the claim order explicitly.
    select c.id, c.definition, c.payload, c.execution, c.attempts, coalesce(c.max_attempts, 25), c.max_attempts,
           c.uncharged_returns, c.priority,
           null::double precision
    from claimed c
    order by c.priority desc, c.run_at, c.id;
  end if;
  v_claimed := cardinality(v_ids) > 0 and found; -- FOUND: this RETURN QUERY's, before PERFORM sets it
  -- Rows the pick locked and did not take (the walk took others; or more than p_limit across
  -- definitions) are free again at commit, but a concurrent claim skipped them and may have gone
  -- idle until its next poll, leaving a due row waiting. Wake the namespace's idle workers at
  -- commit, as an enqueue does (test/db/core.test.ts). Rare: mixed priorities among the due rows,
  -- or a worker with several definitions.
  if v_locked > p_limit then
    perform pg_notify('acta_jobs', p_namespace);
  elsif v_locked_ids is not null then -- the walk ran (a separate IF: no query on the common path)
    if exists (select 1 from unnest(v_locked_ids) as l(id) where l.id <> all (v_ids)) then
      perform pg_notify('acta_jobs', p_namespace);
    end if;
  end if;

  if not v_claimed then
    -- The next due time among rows due later only: nothing of these definitions was claimable
    -- now, so the earliest is in the future (or locked by another claimer, which takes it). Per
    -- definition, the first entry after now() in jobs_due_idx.
    return query
    select null::bigint, null::text, null::jsonb, null::integer, null::integer, null::integer,
           null::integer, null::integer, null::integer,
           (extract(epoch from (min(n.run_at) - now())) * 1000)::double precision
    from unnest(p_definitions) as d(name)
    cross join lateral (
      select j.run_at
      from acta.jobs j
      where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
        and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready' and j.run_at > now()
      order by j.run_at
      limit 1
    ) n;
  end if;
end
$$;
