-- acta.claim_jobs: claim up to p_limit due rows of the given definitions for one worker, admitting
-- each through its lane, concurrency key and rate meter (docs/DESIGN.md, "Policies").
--
-- Contract: each claimed row goes straight to Executing, its execution number (the fence) + 1, its
-- holder p_worker, claimed_at (also its meter's start) the instant it was admitted, once the claim
-- holds its gates' locks, and its lease p_lease_ms from then; returned in claim order: priority,
-- then due time (a fair definition: its turn, fair_tag), then id. A candidate is admitted when its
-- lane has nothing running or waiting and it is the lane's first Ready row by lane_seq (an armed
-- fire not yet due left out: docs/policies.md, "Lanes"), its key has
-- a free slot and no parked row ahead of it, and its meter a token (acta.gate_room); else it is
-- PARKED (blocked_by: out of the claim's indexes, its place kept) until its gate's hand-on or
-- recheck (acta.release_gate). Nothing claimable: one row, job_id null, next_due_in_ms the next due
-- row or gate recheck (null: none). A paused namespace or definition (acta.pauses) has nothing
-- claimable. own_max_attempts: the job's own limit, max_attempts coalesce(own, 25); schedule: a
-- fire's instant, claim time and schedule (migration 0013). Fair order: start-time fair queuing.
-- Resumed scan: after a slow pick (a held snapshot's dead entries) the session's next picks of an
-- ungated plain definition start past its last claimed row for a bounded hold
-- (docs/decisions/2026-12-05-held-snapshot.md; test/db/resumedClaim.test.ts).
-- Fence: the execution number and the holder. Durability: asynchronous commit, this transaction only:
-- a lost claim is a crash right after it (docs/decisions/2026-11-30-claim-commits-asynchronously.md).
-- Locks: FOR UPDATE SKIP LOCKED on the rows picked; gate locks (acta.gate_lock) in increasing order,
-- waiting only for one above all it holds, else trying: a busy gate waits for the next claim.
-- Plan: per definition along jobs_due_idx (jobs_claim_idx if priorities mix; jobs_fair_idx when
-- fair), one plan per session (test/db/plans.test.ts; docs/decisions/2026-12-04-admission-in-the-claim.md).
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
  next_due_in_ms  double precision,
  schedule        jsonb
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
  v_fair         text[];
  v_paused       text[];
  v_plain        text[];
  v_gate         record;
  v_lock         bigint;
  v_gate_locks   bigint[];
  v_other        boolean;
  v_locks        bigint[] := '{}';
  v_max_lock     bigint;
  v_busy         bigint[] := '{}';
  v_want         integer;
  v_round        integer := 0;
  v_ids          bigint[];
  v_fair_ids     bigint[];
  v_fair_prios   integer[];
  v_plain_prios  integer[];
  v_keyed        boolean;
  v_fair_keyed   boolean;
  v_taken        bigint[] := '{}';
  v_seen         bigint[] := '{}';
  v_admitted     bigint[];
  v_parked_ids   bigint[];
  v_parked_kinds text[];
  v_gate_kinds   text[];
  v_gate_keys    text[];
  v_release_kinds text[] := '{}';
  v_release_keys  text[] := '{}';
  v_rate_keys    text[];
  v_rate_counts  integer[];
  v_rate_pers    integer[];
  v_skipped      boolean := false;
  v_notify       boolean := false;
  v_min_priority integer;
  v_max_priority integer;
  v_locked       integer;
  v_locked_ids   bigint[];
  v_nestloop     text;
  v_tagged       integer;
  v_at           timestamptz;
  v_gated        text[];
  v_resume       jsonb;
  v_from_at      timestamptz[];
  v_from_id      bigint[];
  v_until        timestamptz;
  v_pick_start   timestamptz;
  v_pick_ms      double precision;
  v_slow         boolean := false;
  v_walked       boolean := false;
  v_any_keyed    boolean := false;
begin
  -- A limit below 1 would claim nothing and answer "nothing due" although rows are (0), or fail
  -- deep in the plan (a negative one): refused plainly (SQL callers; test/db/core.test.ts).
  if p_limit < 1 then
    raise exception 'acta.claim_jobs: p_limit must be at least 1, got %', p_limit using errcode = '22023';
  end if;
  -- This transaction only (see Durability); a SET clause would be put back before its commit.
  -- Not on PGlite (its Db sets acta.claim_durable for the session): it runs with fsync off, so the
  -- commit's WAL write is all a synchronous commit costs, and single-user PGlite has no WAL writer,
  -- so an asynchronous claim stayed unwritten until a later commit and a SIGKILL of its process lost
  -- it (test/pgliteClaimDurability.test.ts).
  if current_setting('acta.claim_durable', true) is distinct from 'on' then
    perform set_config('synchronous_commit', 'off', true);
  end if;
  -- Each name once: the pick runs per name, and a second pass over a name sees the rows this
  -- transaction has just locked (SKIP LOCKED skips only other transactions' locks), so a name
  -- given twice brought the claim back short (SQL callers, test/db/core.test.ts; the worker
  -- refuses duplicate names).
  -- One definition, the worker's usual case, costs only the test.
  if cardinality(p_definitions) > 1 then
    p_definitions := array(select distinct u.name from unnest(p_definitions) as u(name));
  end if;
  -- With the fair ones, the pauses of the namespace (acta.pause): in the same statement, so that
  -- a claim of a namespace nobody paused pays for it one probe of an empty index.
  select array(select d.name from acta.definitions d
               where d.namespace = p_namespace and d.name = any (p_definitions) and d.fair),
         array(select p.definition from acta.pauses p where p.namespace = p_namespace)
    into v_fair, v_paused;
  if cardinality(v_paused) > 0 then
    -- Paused: the whole namespace (''), or some definitions, which this claim then leaves out.
    -- Nothing left to claim: the idle answer without a due time (a resume wakes the claimer).
    p_definitions := array(select u.name from unnest(p_definitions) as u(name) where u.name <> all (v_paused));
    if '' = any (v_paused) or cardinality(p_definitions) = 0 then
      return query select null::bigint, null::text, null::jsonb, null::integer, null::integer, null::integer,
                          null::integer, null::integer, null::integer, null::double precision, null::jsonb;
      return;
    end if;
    v_fair := array(select u.name from unnest(v_fair) as u(name) where u.name <> all (v_paused));
  end if;
  v_plain := case when cardinality(v_fair) = 0 then p_definitions
                  else array(select u.name from unnest(p_definitions) as u(name) where u.name <> all (v_fair)) end;

  -- Gates whose recheck has come (a key's bounce, a meter's next token): release what they have
  -- room for, before the pick, so this claim can take it. Only tried: see Locks.
  for v_gate in
    select g.kind, g.key, acta.gate_lock(p_namespace, g.kind, g.key) as lock
    from acta.gates g
    where g.namespace = p_namespace and g.recheck_at <= now()
    order by g.recheck_at
    limit 16
  loop
    continue when not (v_gate.lock = any (v_locks) or pg_try_advisory_xact_lock(v_gate.lock));
    v_locks := v_locks || v_gate.lock;
    v_max_lock := greatest(v_max_lock, v_gate.lock);
    -- Under the lock, a new statement: another claim may have rechecked it meanwhile.
    if exists (select 1 from acta.gates g
               where g.namespace = p_namespace and g.kind = v_gate.kind and g.key = v_gate.key and g.recheck_at <= now()) then
      if acta.release_gate(p_namespace, v_gate.kind, v_gate.key) > 0 then
        v_notify := true;
      end if;
    end if;
  end loop;

  -- Fair order: give each fair definition's newly due rows their turns (see Contract). A key's
  -- next turn follows its own latest one (jobs_fair_key_idx) and is never before the turn being
  -- served at that priority (the first of jobs_fair_idx); rows of one key take consecutive turns
  -- in due order. Rows not yet due wait untagged in jobs_due_idx.
  if cardinality(v_fair) > 0 then
    -- The update reaches its rows through `j.id = any (...)` in one scan of jobs_pkey, hashed
    -- against the ranked rows; as a nested loop it probed the key once per row, each probe going
    -- through the whole array (a burst of 2,000 rows: 2 million index scans). Put back after it.
    v_nestloop := current_setting('enable_nestloop');
    perform set_config('enable_nestloop', 'off', true);
    with due as (
      select t.id, coalesce(t.concurrency_key, '') as fkey, t.priority, t.run_at, t.definition
      from unnest(v_fair) as d(name)
      cross join lateral (
        select j.id, j.concurrency_key, j.priority, j.run_at, j.definition
        from acta.jobs j
        where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
          and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
          and j.blocked_by is null and j.fair_tag is null and j.run_at <= now()
        order by j.run_at, j.id
        limit 100000
        for update skip locked
      ) t
    ),
    -- Materialized: the two lookups run once per (definition, key, priority). Inlined into the
    -- update's join they ran once per row tagged, each passing the entries this same update had
    -- added to jobs_fair_idx and jobs_fair_key_idx (invisible to it): a burst of 10,000 rows took
    -- 25 s, all locked meanwhile (test/db/plans.test.ts).
    turn as materialized (
      select g.definition, g.fkey, g.priority,
             greatest(
               coalesce((select f.fair_tag from acta.jobs f
                         where hashtextextended(f.namespace || '/' || f.definition, 0) = hashtextextended(p_namespace || '/' || g.definition, 0)
                           and f.namespace = p_namespace and f.definition = g.definition and f.status = 'ready'
                           and f.blocked_by is null and f.fair_tag is not null and f.priority = g.priority
                         order by f.priority desc, f.fair_tag, f.id limit 1), 0),
               coalesce((select f.fair_tag + 1 from acta.jobs f
                         where hashtextextended(f.namespace || '/' || f.definition, 0) = hashtextextended(p_namespace || '/' || g.definition, 0)
                           and coalesce(f.concurrency_key, '') = g.fkey and f.priority = g.priority
                           and f.namespace = p_namespace and f.definition = g.definition and f.status = 'ready'
                           and f.fair_tag is not null
                         order by f.fair_tag desc limit 1), 0)) as first_turn
      from (select distinct u.definition, u.fkey, u.priority from due u) g
    ),
    ranked as (
      select u.id, u.definition, u.fkey, u.priority,
             row_number() over (partition by u.definition, u.fkey, u.priority order by u.run_at, u.id) as n
      from due u
    )
    update acta.jobs j
    set fair_tag = t.first_turn + r.n - 1
    from ranked r
    join turn t on t.definition = r.definition and t.fkey = r.fkey and t.priority = r.priority
    where j.id = any (array(select u.id from due u)) and j.id = r.id;
    get diagnostics v_tagged = row_count;
    perform set_config('enable_nestloop', v_nestloop, true);
    -- The rows tagged here stay locked until commit, and a concurrent claim skipped them (its
    -- tagging and its pick alike) and may have gone idle until its next poll: wake the
    -- namespace's idle workers at commit when more were tagged than this claim can take, as for
    -- the pick below (test/db/policies.test.ts, "fair order").
    if v_tagged > p_limit then
      v_notify := true;
    end if;
  end if;

  -- Resumed scan: this session's positions, per definition, while they hold (see Contract).
  v_resume := nullif(current_setting('acta.claim_resume', true), '')::jsonb;
  if v_resume -> p_namespace is not null and cardinality(v_plain) > 0 then
    select array_agg(case when x.until > clock_timestamp() then (x.e ->> 1)::timestamptz end order by d.ord),
           array_agg(case when x.until > clock_timestamp() then (x.e ->> 2)::bigint end order by d.ord),
           min(x.until) filter (where x.until > clock_timestamp())
      into v_from_at, v_from_id, v_until
    from unnest(v_plain) with ordinality as d(name, ord)
    cross join lateral (select v_resume -> p_namespace -> d.name as e,
                               (v_resume -> p_namespace -> d.name ->> 0)::timestamptz as until) x;
  end if;

  v_want := p_limit;
  loop
    v_round := v_round + 1;
    v_ids := '{}';
    v_keyed := false;
    v_locked := 0;
    v_locked_ids := null;
    -- Per definition, its first v_want unlocked rows due now in due order, along jobs_due_idx (see
    -- Plan), locked; in claim order. (v_seen: candidates of an earlier round, which this
    -- transaction has locked, so SKIP LOCKED would not skip them.)
    if cardinality(v_plain) > 0 then
      v_pick_start := clock_timestamp();
      select coalesce(array_agg(a.id order by a.priority desc, a.run_at, a.id), '{}'),
             coalesce(array_agg(a.priority order by a.priority desc, a.run_at, a.id), '{}'),
             coalesce(min(a.priority), 0), coalesce(max(a.priority), 0),
             coalesce(bool_or(a.keyed), false)
        into v_ids, v_plain_prios, v_min_priority, v_max_priority, v_keyed
      from unnest(v_plain, v_from_at, v_from_id) as d(name, from_at, from_id)
      cross join lateral (
        select j.id, j.priority, j.run_at,
               (j.concurrency_key is not null or j.rate_key is not null or j.lane is not null) as keyed
        from acta.jobs j
        where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
          and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
          and j.blocked_by is null and j.fair_tag is null and j.run_at <= now()
          and (j.run_at, j.id) > (coalesce(d.from_at, '-infinity'), coalesce(d.from_id, 0))
          and j.id <> all (v_seen)
        order by j.run_at, j.id
        limit v_want
        for update skip locked
      ) a;
      v_locked := cardinality(v_ids);
      -- A first pick from the index's start that was slow for its rows: it walked entries of rows
      -- claimed before, which a held snapshot keeps (see Resumed scan). Not a session's first
      -- claim, whose pick is also planned.
      if v_round = 1 then
        v_pick_ms := extract(epoch from clock_timestamp() - v_pick_start) * 1000;
        if v_until is null then
          v_slow := v_pick_ms >= coalesce(nullif(current_setting('acta.claim_resume_after_ms', true), '')::double precision, 5) + 0.1 * v_locked
                    and current_setting('acta.claim_warm', true) = 'on';
        end if;
      end if;
      if v_locked >= v_want then
        -- Perhaps more due than this claim takes. These are the first in claim order if they share
        -- one priority and no due row has a higher one: any other due row comes later in due order,
        -- or has a lower priority. Otherwise walk jobs_claim_idx in claim order (rows due later at
        -- a higher priority are walked there); the rows locked above and not taken are free again
        -- at commit.
        if v_min_priority = v_max_priority and not exists (
          select 1
          from unnest(v_plain) as d(name)
          cross join lateral (
            select 1
            from acta.jobs j
            where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
              and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
              and j.blocked_by is null and j.fair_tag is null
              and j.priority > v_max_priority and j.run_at <= now()
            -- Along jobs_claim_idx, the range above v_max_priority (usually empty). Without the
            -- order, a plan made without statistics reads the due backlog along jobs_due_idx
            -- instead, filtering on priority.
            order by j.priority desc, j.run_at, j.id
            limit 1
          ) higher
        ) then
          v_ids := v_ids[1:v_want]; -- D definitions gave up to D x v_want
          v_plain_prios := v_plain_prios[1:v_want];
        else
          v_locked_ids := v_ids;
          v_walked := true;
          select coalesce(array_agg(b.id order by b.priority desc, b.run_at, b.id), '{}'),
                 coalesce(array_agg(b.priority order by b.priority desc, b.run_at, b.id), '{}'),
                 coalesce(bool_or(b.keyed), false)
            into v_ids, v_plain_prios, v_keyed
          from (
            select b.*
            from unnest(v_plain) as d(name)
            cross join lateral (
              select j.id, j.priority, j.run_at,
                     (j.concurrency_key is not null or j.rate_key is not null or j.lane is not null) as keyed
              from acta.jobs j
              where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
                and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
                and j.blocked_by is null and j.fair_tag is null and j.run_at <= now()
                and j.id <> all (v_seen)
              order by j.priority desc, j.run_at, j.id
              limit v_want
              for update skip locked
            ) b
            order by b.priority desc, b.run_at, b.id
            limit v_want
          ) b;
        end if;
      end if;
      v_any_keyed := v_any_keyed or v_keyed;
    end if;
    -- A fair definition's rows in turn order, along jobs_fair_idx (tagged rows are due).
    if cardinality(v_fair) > 0 then
      select coalesce(array_agg(a.id order by a.priority desc, a.fair_tag, a.id), '{}'),
             coalesce(array_agg(a.priority order by a.priority desc, a.fair_tag, a.id), '{}'),
             coalesce(bool_or(a.keyed), false)
        into v_fair_ids, v_fair_prios, v_fair_keyed
      from unnest(v_fair) as d(name)
      cross join lateral (
        select j.id, j.priority, j.fair_tag,
               (j.concurrency_key is not null or j.rate_key is not null or j.lane is not null) as keyed
        from acta.jobs j
        where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
          and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
          and j.blocked_by is null and j.fair_tag is not null
          and j.id <> all (v_seen)
        order by j.priority desc, j.fair_tag, j.id
        limit v_want
        for update skip locked
      ) a;
      v_locked := v_locked + cardinality(v_fair_ids);
      v_keyed := v_keyed or v_fair_keyed;
      -- Both kinds: by priority, then each definition's own order, alternating.
      v_ids := array(
        select m.id
        from (select p.id, p.prio, p.ord from unnest(v_ids, v_plain_prios) with ordinality as p(id, prio, ord)
              union all
              select f.id, f.prio, f.ord from unnest(v_fair_ids, v_fair_prios) with ordinality as f(id, prio, ord)) m
        order by m.prio desc, m.ord, m.id
        limit v_want);
    end if;
    v_seen := v_seen || v_ids;
    -- Rows the pick locked and did not take (the walk took others; more than v_want across
    -- definitions) are free again at commit, but a concurrent claim skipped them and may have gone
    -- idle until its next poll: wake the namespace's idle workers at commit, as an enqueue does
    -- (test/db/core.test.ts). Rare: mixed priorities among the due rows, or several definitions.
    if v_locked > v_want then
      v_notify := true;
    elsif v_locked_ids is not null and exists (select 1 from unnest(v_locked_ids) as l(id) where l.id <> all (v_ids)) then
      v_notify := true;
    end if;
    exit when cardinality(v_ids) = 0;

    if not v_keyed then
      v_admitted := v_ids;
      v_at := clock_timestamp();
    else
      -- Admission. First the gates the candidates pass, locked in increasing order (see Locks):
      -- their lanes, their keys under a limit, their meters, read in one pass over the candidates;
      -- and whether any has a lane or a meter (v_other: else the admission is by key only).
      select coalesce(array_agg(distinct x.lock order by x.lock) filter (where x.lock is not null), '{}'),
             coalesce(bool_or(j.lane is not null or j.rate_key is not null), false)
        into v_gate_locks, v_other
      from acta.jobs j
      left join acta.definitions d on d.namespace = p_namespace and d.name = j.definition
      cross join lateral (values
        (case when j.lane is not null then acta.gate_lock(p_namespace, 'lane', j.lane) end),
        (case when j.concurrency_key is not null and d.concurrency_limit is not null
              then acta.gate_lock(p_namespace, 'concurrency', j.concurrency_key) end),
        (case when j.rate_key is not null then acta.gate_lock(p_namespace, 'rate', j.rate_key) end)) as x(lock)
      where j.id = any (v_ids);
      if v_max_lock is null then
        -- None held yet: each lock is above all held before it, so each is waited for, in order.
        perform pg_advisory_xact_lock(l.lock) from unnest(v_gate_locks) as l(lock);
        v_locks := v_gate_locks;
        v_max_lock := v_gate_locks[cardinality(v_gate_locks)];
      else
        foreach v_lock in array v_gate_locks loop
          continue when v_lock = any (v_locks);
          if v_lock > v_max_lock then
            perform pg_advisory_xact_lock(v_lock);
            v_max_lock := v_lock;
          elsif not pg_try_advisory_xact_lock(v_lock) then
            v_busy := v_busy || v_lock;
            continue;
          end if;
          v_locks := v_locks || v_lock;
        end loop;
      end if;
      -- The admission's instant (see Contract, claimed_at): after the gates' locks, so later than
      -- every hand-on and every admission of these gates before it.
      v_at := clock_timestamp();

      -- Then each candidate, in claim order: its lane, its key, its meter (see Contract).
      -- Each CTE once and joined by hash: the generic plan estimates one row per CTE, and as a
      -- nested loop it re-ran kq, and acta.gate_room in it, for every candidate (128 candidates:
      -- 16,384 gate_room calls, ~340 ms a claim; docs/decisions/2026-12-04-policies-hot-path.md).
      -- Put back after it.
      v_nestloop := current_setting('enable_nestloop');
      perform set_config('enable_nestloop', 'off', true);
      if not v_other then
        -- No candidate has a lane or a meter: the key's step alone, the same as below (a candidate
        -- with no lane passes it unless busy), without the lane's probes, the meter's CTEs and their
        -- aggregates, which cost a claim their time with nothing to decide
        -- (docs/decisions/2026-12-04-policies-hot-path.md).
        with c as (
          select j.id, j.concurrency_key as ckey, j.priority as prio, j.run_at, o.ord,
                 d.concurrency_limit as climit,
                 (j.concurrency_key is not null and acta.gate_lock(p_namespace, 'concurrency', j.concurrency_key) = any (v_busy)) as busy
          from unnest(v_ids) with ordinality as o(id, ord)
          join acta.jobs j on j.id = o.id
          left join acta.definitions d on d.namespace = p_namespace and d.name = j.definition
          where j.id = any (v_ids)
        ),
        k as materialized (
          select x.ckey,
                 x.climit - (select count(*) from acta.jobs e
                             where e.namespace = p_namespace and e.concurrency_key = x.ckey and e.status = 'executing') as room,
                 f.priority as fp, f.run_at as fr, f.id as fi
          from (select distinct on (c.ckey) c.ckey, c.climit from c
                where not c.busy and c.ckey is not null and c.climit is not null
                order by c.ckey, c.climit, c.ord) x
          left join lateral (
            select p.priority, p.run_at, p.id from acta.jobs p
            where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
              and p.blocked_by = 'concurrency' and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = x.ckey
            order by p.priority desc, p.run_at, p.id
            limit 1) f on true
        ),
        kq as materialized (
          select c.id, row_number() over (partition by c.ckey order by c.ord) <= k.room as fits
          from c join k on k.ckey = c.ckey
          where not c.busy and (k.fi is null or k.fp < c.prio or (k.fp = c.prio and (k.fr, k.fi) > (c.run_at, c.id)))
        ),
        verdict as (
          select c.id, c.ord, c.ckey,
                 case when c.busy then 'busy'
                      when c.ckey is null or c.climit is null or coalesce(kq.fits, false) then 'admitted'
                      else 'concurrency' end as v
          from c left join kq on kq.id = c.id
        )
        select coalesce(array_agg(v.id order by v.ord) filter (where v.v = 'admitted'), '{}'),
               coalesce(array_agg(v.id) filter (where v.v = 'concurrency'), '{}'),
               coalesce(array_agg(v.v) filter (where v.v = 'concurrency'), '{}'),
               coalesce(bool_or(v.v = 'busy'), false),
               (select coalesce(array_agg(distinct v2.ckey), '{}') from verdict v2 where v2.v = 'concurrency')
          into v_admitted, v_parked_ids, v_parked_kinds, v_skipped, v_gate_keys
        from verdict v;
        v_gate_kinds := array_fill('concurrency'::text, array[cardinality(v_gate_keys)]);
        v_rate_keys := '{}';
        v_rate_counts := '{}';
        v_rate_pers := '{}';
      else
        with c as (
          select j.id, j.definition as def, j.concurrency_key as ckey, j.rate_key as rkey, j.lane, j.lane_seq,
                 j.priority as prio, j.run_at, o.ord,
                 d.concurrency_limit as climit, d.rate_limit as rlimit, d.rate_per_ms as rper,
                 (j.lane is not null and acta.gate_lock(p_namespace, 'lane', j.lane) = any (v_busy))
                 or (j.concurrency_key is not null and acta.gate_lock(p_namespace, 'concurrency', j.concurrency_key) = any (v_busy))
                 or (j.rate_key is not null and acta.gate_lock(p_namespace, 'rate', j.rate_key) = any (v_busy)) as busy
          from unnest(v_ids) with ordinality as o(id, ord)
          join acta.jobs j on j.id = o.id
          left join acta.definitions d on d.namespace = p_namespace and d.name = j.definition
          where j.id = any (v_ids)
        ),
        -- 1. Its lane's first Ready row in commit order (lane_seq: migration 0012), with nothing of the
        -- lane running or waiting. A schedule's armed fire not yet due (never claimed, its instant
        -- to come) holds no place before its instant (docs/policies.md, "Lanes").
        l as (
          select c.*, not c.busy and (c.lane is null or (
                   not exists (select 1 from acta.jobs h
                               where h.namespace = p_namespace and h.lane = c.lane and h.status in ('executing', 'waiting'))
                   and not exists (select 1 from acta.jobs r
                                   where r.namespace = p_namespace and r.lane = c.lane and r.status = 'ready' and r.lane_seq < c.lane_seq
                                     and not (r.schedule is not null and r.execution = 0 and r.run_at > now())))) as lane_ok
          from c
        ),
        -- 2. Its key: the slots free go to the key's candidates in claim order, but not past a parked
        -- row of the key that comes before them. The slots free are acta.gate_room's concurrency
        -- room, written out here (and kept equal to it): the definition's limit less the key's
        -- Executing rows, along jobs_key_held_idx: a function call per key (~8 µs) cost more than
        -- the count (docs/decisions/2026-12-04-policies-hot-path.md).
        k as materialized (
          select x.ckey,
                 x.climit - (select count(*) from acta.jobs e
                             where e.namespace = p_namespace and e.concurrency_key = x.ckey and e.status = 'executing') as room,
                 f.priority as fp, f.run_at as fr, f.id as fi
          from (select distinct on (l.ckey) l.ckey, l.def, l.climit from l
                where l.lane_ok and l.ckey is not null and l.climit is not null
                order by l.ckey, l.climit, l.ord) x
          left join lateral (
            select p.priority, p.run_at, p.id from acta.jobs p
            where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
              and p.blocked_by = 'concurrency' and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = x.ckey
            order by p.priority desc, p.run_at, p.id
            limit 1) f on true
        ),
        kq as materialized (
          select l.id, row_number() over (partition by l.ckey order by l.ord) <= k.room as fits
          from l join k on k.ckey = l.ckey
          where l.lane_ok and (k.fi is null or k.fp < l.prio or (k.fp = l.prio and (k.fr, k.fi) > (l.run_at, l.id)))
        ),
        kc as (
          select l.*, l.lane_ok and (l.ckey is null or l.climit is null or coalesce(kq.fits, false)) as key_ok
          from l left join kq on kq.id = l.id
        ),
        -- 3. Its meter: the tokens it has, the same way (a meter held shut has none).
        m as materialized (
          select x.rkey, r.room, f.priority as fp, f.run_at as fr, f.id as fi
          from (select distinct on (kc.rkey) kc.rkey, kc.def from kc
                where kc.key_ok and kc.rkey is not null
                order by kc.rkey, kc.rlimit, kc.ord) x
          cross join lateral acta.gate_room(p_namespace, 'rate', x.rkey, x.def, v_at) as r
          left join lateral (
            select p.priority, p.run_at, p.id from acta.jobs p
            where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
              and p.blocked_by = 'rate' and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = x.rkey
            order by p.priority desc, p.run_at, p.id
            limit 1) f on true
        ),
        mq as materialized (
          select kc.id, m.room is null or row_number() over (partition by kc.rkey order by kc.ord) <= m.room as fits
          from kc join m on m.rkey = kc.rkey
          where kc.key_ok and (m.fi is null or m.fp < kc.prio or (m.fp = kc.prio and (m.fr, m.fi) > (kc.run_at, kc.id)))
        ),
        verdict as (
          select kc.id, kc.ord, kc.lane, kc.ckey, kc.rkey, kc.rlimit, kc.rper,
                 case when kc.busy then 'busy'
                      when not kc.lane_ok then 'lane'
                      when not kc.key_ok then 'concurrency'
                      when kc.rkey is null or coalesce(mq.fits, false) then 'admitted'
                      else 'rate' end as v
          from kc left join mq on mq.id = kc.id
        )
        select coalesce(array_agg(v.id order by v.ord) filter (where v.v = 'admitted'), '{}'),
               coalesce(array_agg(v.id) filter (where v.v in ('lane', 'concurrency', 'rate')), '{}'),
               coalesce(array_agg(v.v) filter (where v.v in ('lane', 'concurrency', 'rate')), '{}'),
               coalesce(bool_or(v.v = 'busy'), false),
               (select coalesce(array_agg(g.kind), '{}') from (select distinct v2.v as kind, case v2.v when 'lane' then v2.lane when 'rate' then v2.rkey else v2.ckey end as key from verdict v2 where v2.v in ('lane', 'concurrency', 'rate')) g),
               (select coalesce(array_agg(g.key), '{}') from (select distinct v2.v as kind, case v2.v when 'lane' then v2.lane when 'rate' then v2.rkey else v2.ckey end as key from verdict v2 where v2.v in ('lane', 'concurrency', 'rate')) g),
               (select coalesce(array_agg(s.rkey), '{}') from (select v3.rkey, count(*)::integer as n, max(v3.rper) as per from verdict v3 where v3.v = 'admitted' and v3.rkey is not null and v3.rlimit is not null group by v3.rkey) s),
               (select coalesce(array_agg(s.n), '{}') from (select v3.rkey, count(*)::integer as n, max(v3.rper) as per from verdict v3 where v3.v = 'admitted' and v3.rkey is not null and v3.rlimit is not null group by v3.rkey) s),
               (select coalesce(array_agg(s.per), '{}') from (select v3.rkey, count(*)::integer as n, max(v3.rper) as per from verdict v3 where v3.v = 'admitted' and v3.rkey is not null and v3.rlimit is not null group by v3.rkey) s)
          into v_admitted, v_parked_ids, v_parked_kinds, v_skipped, v_gate_kinds, v_gate_keys, v_rate_keys, v_rate_counts, v_rate_pers
        from verdict v;
      end if;

      perform set_config('enable_nestloop', v_nestloop, true);
      v_notify := v_notify or v_skipped;
      v_release_kinds := v_release_kinds || v_gate_kinds;
      v_release_keys := v_release_keys || v_gate_keys;
      -- Refused: parked where it stands.
      if cardinality(v_parked_ids) > 0 then
        update acta.jobs j
        set blocked_by = p.kind
        from unnest(v_parked_ids, v_parked_kinds) as p(id, kind)
        where j.id = any (v_parked_ids) and j.id = p.id;
      end if;
      -- A round refused whole: the head of the queue is a backlog of gates that have no room (a
      -- tenant's burst at its limit, a long lane). Park the rest of their due rows now, in one
      -- statement each, so that this claim and the next reach the rows behind them; a round that
      -- admitted something parks only what it met (interleaved keys mostly find room).
      if cardinality(v_admitted) = 0 and cardinality(v_parked_ids) > 0 then
        update acta.jobs j set blocked_by = 'concurrency'
        where j.id = any (array(
          select x.id from acta.jobs x
          where x.namespace = p_namespace and x.status = 'ready' and x.blocked_by is null
            and x.concurrency_key = any (array(select g.key from unnest(v_gate_kinds, v_gate_keys) as g(kind, key) where g.kind = 'concurrency'))
            and x.run_at <= now() and x.definition = any (p_definitions)
          limit 10000
          for update skip locked));
        update acta.jobs j set blocked_by = 'rate'
        where j.id = any (array(
          select x.id from acta.jobs x
          where x.namespace = p_namespace and x.status = 'ready' and x.blocked_by is null
            and x.rate_key = any (array(select g.key from unnest(v_gate_kinds, v_gate_keys) as g(kind, key) where g.kind = 'rate'))
            and x.run_at <= now() and x.definition = any (p_definitions)
          limit 10000
          for update skip locked));
        -- A lane's rows behind its first Ready row (that one is its head, running or not). An armed
        -- fire not yet due is neither (see the lane's rule above): parked, no hand-on would reach it.
        update acta.jobs j set blocked_by = 'lane'
        where j.id = any (array(
          select x.id from acta.jobs x
          join unnest(v_gate_kinds, v_gate_keys) as g(kind, key) on g.kind = 'lane' and x.lane = g.key
          where x.namespace = p_namespace and x.status = 'ready' and x.blocked_by is null
            and not (x.schedule is not null and x.execution = 0 and x.run_at > now())
            and x.lane_seq > (select min(f.lane_seq) from acta.jobs f where f.namespace = p_namespace and f.lane = g.key and f.status = 'ready'
                                and not (f.schedule is not null and f.execution = 0 and f.run_at > now()))
          limit 10000
          for update skip locked));
      end if;
      -- Admitted through a meter: one row of its log for this claim's starts, numbered by the
      -- meter's running count (acta.meter_starts; acta.gate_room reads it). The log keeps the window
      -- and the last row before it (whose count gate_room subtracts): older rows are deleted here,
      -- from the last one deleted on (starts_pruned) to that row, so each is read once, and no probe
      -- walks the index entries of deleted rows (docs/decisions/2026-12-05-rate-meter.md).
      if cardinality(v_rate_keys) > 0 then
        with s as materialized (
          select u.key, u.n, g.starts_pruned as pruned,
                 (select x.upto from acta.meter_starts x
                  where x.namespace = p_namespace and x.key = u.key and x.at <= v_at - u.per * interval '1 millisecond'
                  order by x.at desc limit 1) as base
          from unnest(v_rate_keys, v_rate_counts, v_rate_pers) as u(key, n, per)
          left join acta.gates g on g.namespace = p_namespace and g.kind = 'rate' and g.key = u.key
        ),
        pruned as (
          -- Per meter along meter_starts_upto_idx: a lateral kept apart (offset 0) from the planner's
          -- joins, which as a hash join read every row of the namespace's meters.
          delete from acta.meter_starts x
          where x.ctid = any (array(
            select y.ctid from s cross join lateral (
              select y.ctid from acta.meter_starts y
              where y.namespace = p_namespace and y.key = s.key and y.upto > coalesce(s.pruned, 0) and y.upto < s.base
              offset 0) y))
          returning x.key, x.upto
        ),
        counted as (
          insert into acta.gates as g (namespace, kind, key, starts, starts_pruned)
          select p_namespace, 'rate', s.key, s.n, coalesce((select max(p.upto) from pruned p where p.key = s.key), 0)
          from s
          on conflict (namespace, kind, key) do update
            set starts = g.starts + excluded.starts, starts_pruned = greatest(g.starts_pruned, excluded.starts_pruned)
          returning g.key, g.starts
        )
        insert into acta.meter_starts as x (namespace, key, at, upto)
        select p_namespace, c.key, v_at, c.starts from counted c
        on conflict (namespace, key, at) do update set upto = excluded.upto;
      end if;
    end if;
    -- Claimed now, round by round, so that the next round's admission counts these as holding
    -- their slots and their lanes.
    if cardinality(v_admitted) > 0 then
      v_taken := v_taken || v_admitted;
      return query
      with claimed as (
        -- By primary key from the locked ids (an array, not a join: with statistics the planner
        -- joined the picked rows against a scan of the whole table).
        update acta.jobs j
        set status = 'executing',
            execution = j.execution + 1,
            lease_holder = p_worker,
            lease_expires_at = v_at + p_lease_ms * interval '1 millisecond',
            claimed_at = v_at,
            started = false
        where j.id = any (v_admitted)
        returning j.id, j.definition, j.payload, j.execution, j.attempts, j.max_attempts, j.uncharged_returns, j.priority, j.run_at,
                  j.schedule, j.scheduled_at
      )
      -- UPDATE ... RETURNING has no order of its own: restore the claim order explicitly, as the
      -- candidates came: by priority, due time and id, or with a fair definition, by place in
      -- v_admitted (a fair row's turn order). Not a join with the array's rows: planned for 10
      -- rows, it was a nested loop that rescanned the claimed rows once per row, 128 x 128.
      select c.id, c.definition, c.payload, c.execution, c.attempts, coalesce(c.max_attempts, 25), c.max_attempts,
             c.uncharged_returns, c.priority,
             null::double precision,
             -- A schedule's fire (acta.claimed_fire, called for fires only); null for every other row.
             case when c.schedule is not null then acta.claimed_fire(p_namespace, c.schedule, c.scheduled_at, v_at, c.id) end
      from claimed c
      order by case when cardinality(v_fair) > 0 then array_position(v_admitted, c.id) end, c.priority desc, c.run_at, c.id;
    end if;
    exit when cardinality(v_taken) >= p_limit or v_locked < v_want or v_round >= 4;
    v_want := p_limit - cardinality(v_taken);
  end loop;

  -- Resumed scan: the positions of this claim's rows, per plain definition, kept by the session
  -- until their time (a resumed one's, else now + max(1 s, 20 x the pick), at most 10 s); expired
  -- ones dropped. A row placed behind meanwhile waits at most that long, and an idle answer is due
  -- by then. The trigger (a pick of >= 5 ms + 0.1 ms a row, not a session's first) and the hold
  -- move with acta.claim_resume_after_ms and acta.claim_resume_ms (tests; PGlite sets Infinity).
  -- None where they could skip rows that come back behind: a definition with a limit, a meter or
  -- a lane, a claim that met a keyed row (parked rows come back with their place kept: its
  -- namespace's positions for these definitions go), or one that walked jobs_claim_idx (it took
  -- rows by priority, not from the position on).
  if current_setting('acta.claim_warm', true) is distinct from 'on' then
    perform set_config('acta.claim_warm', 'on', false);
  end if;
  if (v_slow or v_until is not null) and v_any_keyed then
    perform set_config('acta.claim_resume', (coalesce(v_resume, '{}') || jsonb_build_object(p_namespace, coalesce(v_resume -> p_namespace, '{}') - v_plain))::text, false);
  elsif (v_slow or v_until is not null) and cardinality(v_taken) > 0 and not v_walked then
    v_gated := array(select d.name from acta.definitions d
                     where d.namespace = p_namespace and d.name = any (v_plain)
                       and (d.concurrency_limit is not null or d.rate_limit is not null or coalesce((d.policy ->> 'lane')::boolean, false)));
    perform set_config('acta.claim_resume', (coalesce(v_resume, '{}') || jsonb_build_object(p_namespace,
      coalesce((select jsonb_object_agg(e.k, e.v) from jsonb_each(v_resume -> p_namespace) as e(k, v)
                where (e.v ->> 0)::timestamptz > clock_timestamp()), '{}')
      || coalesce((select jsonb_object_agg(p.definition, jsonb_build_array(p.until, p.run_at, p.id))
                   from (select distinct on (j.definition) j.definition, j.run_at, j.id,
                                coalesce(case when (v_resume -> p_namespace -> j.definition ->> 0)::timestamptz > clock_timestamp()
                                              then (v_resume -> p_namespace -> j.definition ->> 0)::timestamptz end,
                                         clock_timestamp() + least(10000, greatest(coalesce(nullif(current_setting('acta.claim_resume_ms', true), '')::double precision, 1000),
                                                                                   20 * v_pick_ms)) * interval '1 millisecond') as until
                         from acta.jobs j
                         where j.id = any (v_taken) and j.definition = any (v_plain) and j.definition <> all (v_gated)
                           and (v_slow or (v_resume -> p_namespace -> j.definition ->> 0)::timestamptz > clock_timestamp())
                         order by j.definition, j.run_at desc, j.id desc) p), '{}')))::text, false);
  end if;

  -- The gates rows were parked on: set their recheck (the rows admitted hold their slots now), and
  -- release what has room after all (a lane whose head was parked behind nothing).
  if cardinality(v_release_kinds) > 0 then
    for v_gate in select distinct g.kind, g.key from unnest(v_release_kinds, v_release_keys) as g(kind, key) loop
      if acta.release_gate(p_namespace, v_gate.kind, v_gate.key) > 0 then
        v_notify := true;
      end if;
    end loop;
  end if;
  if v_notify then
    perform pg_notify('acta_jobs', p_namespace);
  end if;

  if cardinality(v_taken) = 0 then
    -- The next due time among rows due later only: nothing of these definitions was claimable
    -- now, so the earliest is in the future (or locked by another claimer, which takes it). Per
    -- definition, the first entry after now() in jobs_due_idx; and the namespace's next gate
    -- recheck, when a parked row may be released.
    return query
    select null::bigint, null::text, null::jsonb, null::integer, null::integer, null::integer,
           null::integer, null::integer, null::integer,
           (extract(epoch from (least(min(n.run_at),
                                      (select min(g.recheck_at) from acta.gates g
                                       where g.namespace = p_namespace and g.recheck_at > now()),
                                      v_until) - now())) * 1000)::double precision,
           null::jsonb
    from unnest(p_definitions) as d(name)
    cross join lateral (
      select j.run_at
      from acta.jobs j
      where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
        and j.namespace = p_namespace and j.definition = d.name and j.status = 'ready'
        and j.blocked_by is null and j.fair_tag is null and j.run_at > now()
      order by j.run_at
      limit 1
    ) n;
  end if;
end
$$;
