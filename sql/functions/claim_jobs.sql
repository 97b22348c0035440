-- acta.claim_jobs: claim up to p_limit due rows of the given definitions for one worker.
--
-- Contract: each claimed row moves straight to Executing (the claim starts the execution; there
-- is no separate start write), its execution number (the fence) goes up by one, its lease is set
-- to now() + p_lease_ms and its holder to p_worker. Returns the claimed rows in claim order.
-- When nothing is claimable it returns exactly one row whose job_id is null and whose
-- next_due_in_ms is the time until the earliest future row of those definitions is due (null
-- when there is none), measured on the database clock (DESIGN.md: the claimer's idle sleep).
-- Durability: the claim commits asynchronously (synchronous_commit = off for its transaction
-- only), so it does not wait for a WAL flush. If the server crashes before the flush, the claim
-- is lost although the worker got its answer: exactly DESIGN.md's "a claim whose answer was
-- lost is treated as a crash right after it". The row comes back Ready with its old execution
-- number, and the next claim reuses that number under ANOTHER holder; every fenced write
-- (complete_executions, heartbeat, record_step) checks (job, execution, holder), so the lost
-- claim's worker can never write for it. Enqueue, completions, step records and heartbeats stay
-- synchronous: what they acknowledge is durable.
-- Locks: FOR UPDATE SKIP LOCKED on the rows taken, so concurrent claimers never wait on or
-- double-take a row.
-- Plan: per definition, the pick locks the first p_limit rows due now in due order, along
-- jobs_due_idx (migration 0005: the definition's Ready rows by due time, then id), a walk that ends
-- at the first row due later. Fewer than p_limit: they are all the rows due (unlocked). Otherwise
-- they are the first in claim order when they share one priority and no due row of these
-- definitions has a higher one (a look at jobs_claim_idx above that priority: usually an empty
-- range); if not, the pick walks jobs_claim_idx (partial, in claim order within one definition:
-- migration 0003) and stops after p_limit rows. Walking jobs_claim_idx alone, a claim that found
-- fewer due rows than it asked for walked every Ready row of its definition due later (priority
-- leads that index, so the due time cannot end the walk): 3 due and 100,000 due in an hour, 21-34
-- ms per 8-row claim (adversarial trial). Rows due later at a higher priority than due ones are
-- still walked when the due rows mix priorities or a higher one is due (README, "What makes a
-- claim slower"). Counted (bench/server-instructions.sh): 713,473 instructions per 1-row claim
-- against 604,113 with the one-statement pick before; 8-row claim + completion 313,084 against
-- 298,587 per job; 128-row 180,747 against 179,331. The pick once walked the namespace's index, so
-- every Ready row of a definition this worker does not run that came first in claim order was
-- walked on every claim (new-user trial: 200,000 such rows, 105-109 ms per claim against 0.33). A
-- worker running D definitions locks up to D x p_limit rows in the pick and keeps p_limit; the
-- others stay Ready and are free again at commit. The idle claim's next due time is the first
-- entry after now() of each definition in jobs_due_idx.
-- Key: both indexes lead with hashtextextended(namespace || '/' || definition, 0), one bigint per
-- queue (migration 0006), so each query names its definition by that key and checks
-- namespace and definition on every row it reads: two queues whose texts hash alike (namespace
-- "a" with definition "b/c", namespace "a/b" with "c") share a range and nothing else (core.test).
-- Counted against the text-led indexes of 0003/0005: 630,810 against 672,643 instructions per
-- 1-row claim, 301,606 against 307,982 per job for 8-row claim + completion, 179,230 against
-- 180,293 for 128 rows; an enqueue 62,710 against 88,812 per job.
-- With stale statistics (taken while nothing was Ready, e.g. a table of finished jobs, then a burst
-- of enqueues) the planner would rather read every Ready row through jobs_due_idx and sort them: measured
-- here at 60,000 queued, 35 ms per claim against 1.2 ms (issue 5). So sorting is disabled while
-- the pick is planned (the final ORDER BY of the <= p_limit claimed rows still sorts: it has no
-- other plan). Disabling adds 1e10 to the cost of any plan that sorts, which would set off JIT
-- compilation (80 ms for a 128-row claim), so JIT is off as well. Sequential scans are off too:
-- the plan is made once per session (see plan_cache_mode below), and made while acta.jobs held a
-- few analyzed rows, the UPDATE read the whole table to find its rows, and went on doing so as
-- the table grew, until an ANALYZE replanned it (test/db/plans.test.ts; counted by
-- bench/server-instructions.sh: 900,000 against 606,000 instructions per 1-row claim at 400
-- rows). All three hold for the whole call (the function's SET clauses; put back at its exit):
-- the idle probe is planned under them too (put back before it, they let it be planned as a
-- sequential scan on a small table, which an idle worker then ran on every poll as the table grew:
-- 300,010 rows, 66-83 ms per idle claim; adversarial trial). SET clauses rather than set_config
-- calls in the body: 671,860 against 716,705 instructions per 1-row claim, 307,982 against 314,139
-- per job for 8-row claim + completion (bench/server-instructions.sh). synchronous_commit stays a
-- set_config call: a SET clause would be put back before the commit it is for.
-- Answer: typed columns; uncharged_returns lets the worker apply recovery's bound on uncharged
-- returns to a claim that reaches it after its attempt deadline (executions_complete.sql,
-- 'expired'). own_max_attempts is the job's own limit, null when it has none (the worker then
-- applies its definition's: migration 0004); max_attempts is coalesce(own, 25), the number
-- workers from before migration 0004 read, which apply the smaller of it and their definition's:
-- a null there would make them fail every job at its first error during an upgrade (adversarial
-- trial). (Tried and dropped, issue 5: one JSON text per row saved the client 2 us
-- per row and cost the server 1.4, timed in the server: 10.5 -> 11.9 us per claimed row; the
-- server is what a fleet shares.) Earlier commits had other shapes; CREATE OR REPLACE cannot change a
-- function's result type, hence the drop.
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
-- Executing with no lease, which recovery never takes back if its worker dies (adversarial trial:
-- SQL callers; the worker always passes every argument).
strict
-- One plan per session, from the statement's shape (the same one the custom plans chose, tested in
-- test/db/plans.test.ts): planning anew for each call cost an idle worker's claim 0.11 ms of its
-- ~0.95 (issue 5, latency).
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
  -- A limit below 1 claimed nothing and answered "nothing due" although rows were (0), or failed
  -- deep in the plan (a negative one): refused plainly instead (SQL callers; an adversarial trial).
  if p_limit < 1 then
    raise exception 'acta.claim_jobs: p_limit must be at least 1, got %', p_limit using errcode = '22023';
  end if;
  perform set_config('synchronous_commit', 'off', true); -- this transaction only (see Durability)
  -- Each name once: the pick runs per name, and a second pass over a name sees the rows this
  -- transaction has just locked (SKIP LOCKED skips only other transactions' locks), so a name
  -- given twice brought the claim back short (SQL callers; the worker refuses duplicate names).
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
    -- (One statement computing both cost more: 733,119 against 713,473 instructions per 1-row
    -- claim, bench/server-instructions.sh.)
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
        -- a plan made without statistics read the due backlog along jobs_due_idx instead,
        -- filtering on priority: 545 against 105 us of server CPU per job in a default drain.
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
      -- joined the picked rows against a scan of the whole table; issue 5).
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
  -- idle until its next poll (adversarial trial: a due row left waiting while a peer slept). Wake
  -- the namespace's idle workers at commit, as an enqueue does. Rare: mixed priorities among the
  -- due rows, or a worker with several definitions.
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
