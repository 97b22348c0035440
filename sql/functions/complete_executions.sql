-- acta.complete_executions: write the outcomes of a batch of attempts, of mixed shapes, in one call.
--
-- Contract: parallel arrays, one element per attempt; p_outcomes[i] names the element's shape, and
-- the table `decision` in the body says what each shape does to the job row and its ledger row (a
-- new shape is one row there); an attempt of a row whose cancel was requested while it ran
-- (acta.cancel_job) ends Cancelled whatever it sent, unless it succeeded. Returns one letter per
-- element, in input order: 's' Succeeded, 'f' Failed, 'r' Ready again (a retry, a hand-back, a
-- rate-limited attempt), 'c' Cancelled, 'w' Waiting (parked), 'x' not applied: stale, or no such shape
-- (docs/decisions/2026-12-03-completion-decide-then-apply.md).
-- Hand-on (docs/DESIGN.md, "Policies"): each applied attempt frees its key's slot for the key's
-- parked rows (acta.release_gate); a lane's head that ended (Succeeded, Failed, Cancelled) hands the
-- lane on; a rate-limited attempt shuts its meter for the fleet for its retry's delay. A row due
-- later gives up its fair turn and takes a new one when due (acta.claim_jobs).
-- Fence: applied only while its row is Executing with the same execution number AND held by
-- p_worker (test/db/fencing.test.ts). Ledger: one acta.executions row per applied element but a
-- moved success (its acta.succeeded_jobs row is its record), finished_at read once this call holds
-- every row it writes; the row's finished_at and run_at from now() (docs/decisions/2026-12-05-ledger-times.md).
-- Wakeup: a row back to Ready, or a parked row released, sends NOTIFY acta_jobs at commit.
-- Locks: the applied rows, then the parents of the children among them in id order, then the gates
-- of the keyed ones in increasing order (acta.gate_lock), then the ending fires' schedules in name
-- order, until commit. Durability: the caller's commit, synchronous by default. A success whose
-- row nothing else needs moves to acta.succeeded_jobs, fenced alike (see `moved`; migration 0023);
-- under retention zero (docs/retention.md) it is deleted instead.
-- Plan: one generic plan per session reaching acta.jobs only through `j.id = any (p_ids)` (jobs_pkey
-- hash-joined to the input) whatever the statistics (test/db/plans.test.ts); see the SET clauses.
drop function if exists acta.complete_executions(uuid, jsonb);
drop function if exists acta.complete_executions(uuid, bigint[], integer[], text[], jsonb[], jsonb[], integer[]);
drop function if exists acta.complete_executions(uuid, bigint[], integer[], text[], jsonb[], jsonb[], integer[], timestamptz[]);
create or replace function acta.complete_executions(
  p_worker          uuid,
  p_ids             bigint[],
  p_executions      integer[],
  p_outcomes        text[],
  p_results         jsonb[],
  p_errors          jsonb[],
  p_retry_delays_ms integer[],
  p_next_fires      timestamptz[] default null
) returns text
language plpgsql
-- One plan per session, from the statement's shape: custom plans, made for a session's first five
-- calls, estimated this holder's Executing rows at 1 and read the whole table. With sequential
-- scans, plain index scans and nested loops off, the only plan left reaches acta.jobs through
-- `j.id = any (p_ids)` (docs/decisions/2026-11-30-fenced-writes-plan-settings.md). Those plan
-- types are priced at 10^10, past JIT's threshold: a join the settings leave (a fire's schedule)
-- was compiled at every call, 0.5 s, so JIT is off here (test/db/plans.test.ts, "JIT").
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_indexscan = off
set enable_nestloop = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_answer     text;
  v_namespace  text;
  v_gate_kinds text[];
  v_gate_keys  text[];
  v_shut_keys  text[];
  v_shut_ms    integer[];
  v_gate       record;
  v_released   boolean := false;
  v_fires      bigint[];
  v_parents    bigint[];
  v_parent_failed boolean[];
  v_applied    integer;
  v_ords       bigint[];
  v_keys       text[];
  v_lanes      text[];
  v_zero       boolean;
  v_zero_namespace text;
  v_moved_ords bigint[];
  v_moved_namespace text;
  v_moved_keys text[];
  v_moved_lanes text[];
  v_gone       bigint[];
begin
  -- Retention zero: the namespace's sys.retention keeps Succeeded rows 0 ms (payload succeededMs 0,
  -- not paused). One batch is one worker's, so one namespace: its first row's.
  v_zero := exists (select 1 from acta.schedules s
                    where s.namespace = (select j.namespace from acta.jobs j where j.id = p_ids[1])
                      and s.name = 'sys.retention' and not s.paused and s.payload -> 'succeededMs' = '0'::jsonb);
  -- A success leaves acta.jobs here (`moved`: deleted, fenced as the update below fences) when
  -- nothing else needs its row there: not a child (its parent may still read it: prune_jobs'
  -- `keep`), not a watched row (its trigger notifies the observer of the update), not a schedule's
  -- fire (it arms the next instant below; one fire per instant is jobs_schedule_fire_idx), no
  -- idempotency key (it dedupes while its row is in acta.jobs: jobs_idempotency_key_idx; retention
  -- zero's dedupe window is 0, so a keyed row goes there too). The row
  -- goes to acta.succeeded_jobs as the update would have left it (migration 0023), and is its last
  -- attempt's ledger record too (acta.all_executions: its worker in lease_holder, its finished_at a
  -- clock read after its own row lock, as `ended` below); under retention zero it goes for good
  -- (it would go with the job: docs/retention.md), and only its namespace's: a stray element of a
  -- direct call cannot drop another namespace's row. The update then no longer sees these rows; a
  -- row changed meanwhile so that it no longer qualifies (watched) is left to the update, and a
  -- batch all moved skips it.
  if v_zero then
    v_zero_namespace := (select x.namespace from acta.jobs x where x.id = p_ids[1]);
  end if;
  with moved as (
    delete from acta.jobs j
    using unnest(p_ids, p_executions, p_outcomes, p_results) with ordinality as i(id, execution, outcome, result, ord)
    where i.outcome = 'succeeded'
      and j.id = any (p_ids) and j.id = i.id and j.execution = i.execution and j.status = 'executing' and j.lease_holder = p_worker
      and j.parent_id is null and not j.watched and j.schedule is null and (j.idempotency_key is null or j.namespace = v_zero_namespace)
    returning j.*, i.ord, i.result as new_result
  ),
  kept as (
    insert into acta.succeeded_jobs (id, namespace, definition, payload, status, priority, run_at, execution, attempts, max_attempts,
                                     uncharged_returns, lease_holder, lease_expires_at, claimed_at, started, idempotency_key,
                                     concurrency_key, lane, parent_id, result, error, created_at, finished_at, rate_key, blocked_by,
                                     fair_tag, progress, cancel_requested_at, watched, lane_seq, schedule, scheduled_at, wait_names,
                                     wait_step, wait_until, children_open, fail_parent, children_failed)
    select m.id, m.namespace, m.definition, m.payload, 'succeeded', m.priority, m.run_at, m.execution, m.attempts + 1, m.max_attempts,
           m.uncharged_returns, p_worker, null, m.claimed_at, false, null,
           m.concurrency_key, m.lane, null, m.new_result, null, m.created_at, clock_timestamp(), m.rate_key, m.blocked_by,
           m.fair_tag, m.progress, m.cancel_requested_at, false, m.lane_seq, null, m.scheduled_at, null,
           null, null, m.children_open, m.fail_parent, m.children_failed
    from moved m
    where m.namespace is distinct from v_zero_namespace
  )
  select array_agg(m.ord), min(m.namespace),
         array_agg(m.concurrency_key) filter (where m.concurrency_key is not null),
         array_agg(m.lane) filter (where m.lane is not null),
         array_agg(m.id) filter (where m.namespace = v_zero_namespace)
    into v_moved_ords, v_moved_namespace, v_moved_keys, v_moved_lanes, v_gone
  from moved m;
  v_applied := 0;
  if coalesce(cardinality(v_moved_ords), 0) < cardinality(p_ids) then
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
    --   follows          what else the transition sets off, applied after it over `done`:
    --                    'shut_meter' holds the row's rate meter shut until its due time. Every
    --                    transition frees a concurrency slot, and a finished one hands its lane on
    --                    (see Hand-on); a schedule's armed fire that ends arms the next (see
    --                    Recurring fire); a finished child tells its parent (acta.tell_parents).
    --                    'wait' parks the row (Waiting: no attempt charged, its lane kept held)
    --                    for the wait the element's result describes, {names, step, timeoutMs}
    --                    (src/workflows/; wait_until: its timeout), then acta.settle_waits
    --                    wakes it at once if its wait is answered already (docs/workflows.md).
    -- 'skipped' is a schedule's fire its worker did not run: missed, by the schedule's catch-up
    -- policy (docs/schedules.md); it ends Cancelled, uncharged, and arms the instant the worker sent.
    decision (outcome, last_attempt, status, answer, charged, uncharged_return, settles, due, finished, recorded_as, follows) as (
      values ('succeeded',    null::boolean, 'succeeded', 's', true,  false, true,  'kept',  true,  'succeeded',    null::text),
             ('failed',       false,         'ready',     'r', true,  false, false, 'retry', false, 'failed',       null),
             ('failed',       true,          'failed',    'f', true,  false, false, 'kept',  true,  'failed_final', null),
             ('failed_final', null,          'failed',    'f', true,  false, false, 'kept',  true,  'failed_final', null),
             ('handed_back',  null,          'ready',     'r', false, false, false, 'now',   false, 'handed_back',  null),
             ('expired',      null,          'ready',     'r', false, true,  false, 'now',   false, 'expired',      null),
             ('rate_limited', null,          'ready',     'r', false, false, false, 'retry', false, 'rate_limited', 'shut_meter'),
             ('cancelled',    null,          'cancelled', 'c', false, false, false, 'kept',  true,  'cancelled',    null),
             ('skipped',      null,          'cancelled', 'c', false, false, false, 'kept',  true,  'skipped',      null),
             ('signal_wait',  null,          'waiting',   'w', false, false, false, 'wait',  false, 'signal_wait',  'wait'),
             ('children_wait', null,         'waiting',   'w', false, false, false, 'wait',  false, 'children_wait', 'wait')
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
          finished_at = case when d.finished then now() end,
          fair_tag = case when d.due = 'retry' then null else j.fair_tag end,
          wait_names = case when d.due = 'wait' and i.result ? 'names' then array(select jsonb_array_elements_text(i.result->'names')) end,
          wait_step = case when d.due = 'wait' then i.result->>'step' end,
          wait_until = case when d.due = 'wait' then now() + (i.result->>'timeoutMs')::bigint * interval '1 millisecond' end
      from input i, decision d
      where d.outcome = case when j.cancel_requested_at is null or i.outcome = 'succeeded' then i.outcome else 'cancelled' end
        and j.id = any (p_ids) and j.id = i.id and j.execution = i.execution and j.status = 'executing' and j.lease_holder = p_worker
        and (d.last_attempt is null or d.last_attempt = (j.max_attempts is not null and j.attempts + 1 >= j.max_attempts))
      returning j.id, j.execution, j.claimed_at, i.error, d.answer, d.charged, d.recorded_as, d.status, d.follows, i.delay_ms, i.ord,
                j.namespace, j.concurrency_key, j.lane, j.rate_key, j.schedule, j.parent_id, j.fail_parent
    ),
    -- The clock, read once, after every applied row is locked: counting `done` takes all of it. Read
    -- as a scalar subquery: joined, it is a nested loop, priced past JIT's threshold (see SET clauses).
    ended as materialized (
      select clock_timestamp() as at from (select count(*) from done) n
    ),
    ledger as (
      insert into acta.executions (job_id, execution, worker_id, claimed_at, finished_at, outcome, charged, error)
      select d.id, d.execution, p_worker, d.claimed_at, (select e.at from ended e), d.recorded_as, d.charged, d.error
      from done d
    )
    -- One pass over `done`: the answers in input order, and what the steps below need, each array
    -- null when no applied element needs that step (a batch of plain jobs takes none of them).
    -- Gates (see Hand-on): every concurrency key, the lane of a head that finished, the meter of a
    -- rate-limited attempt; a key may come twice (deduplicated below, only when there is one).
    select string_agg(d.answer, '' order by d.ord), count(*), array_agg(d.ord order by d.ord), min(d.namespace),
           array_agg(d.concurrency_key) filter (where d.concurrency_key is not null),
           array_agg(d.lane) filter (where d.lane is not null and d.status in ('succeeded', 'failed', 'cancelled')),
           array_agg(d.rate_key) filter (where d.rate_key is not null and d.follows = 'shut_meter'),
           array_agg(coalesce(d.delay_ms, 0)) filter (where d.rate_key is not null and d.follows = 'shut_meter'),
           array_agg(d.id) filter (where d.schedule is not null and d.status in ('succeeded', 'failed', 'cancelled')),
           array_agg(d.parent_id order by d.parent_id)
             filter (where d.parent_id is not null and d.status in ('succeeded', 'failed', 'cancelled')),
           array_agg(coalesce(d.fail_parent, false) and d.status <> 'succeeded' order by d.parent_id)
             filter (where d.parent_id is not null and d.status in ('succeeded', 'failed', 'cancelled'))
      into v_answer, v_applied, v_ords, v_namespace, v_keys, v_lanes, v_shut_keys, v_shut_ms, v_fires, v_parents, v_parent_failed
    from done d;
  end if;
  -- The rows `moved` took join the answers ('s') and the hand-on (their keys; their lanes, finished).
  if v_moved_ords is not null then
    v_answer := coalesce(v_answer, '') || repeat('s', cardinality(v_moved_ords));
    v_ords := coalesce(v_ords, '{}') || v_moved_ords;
    v_namespace := coalesce(v_namespace, v_moved_namespace);
    v_keys := case when v_keys is null and v_moved_keys is null then null else coalesce(v_keys, '{}') || coalesce(v_moved_keys, '{}') end;
    v_lanes := case when v_lanes is null and v_moved_lanes is null then null else coalesce(v_lanes, '{}') || coalesce(v_moved_lanes, '{}') end;
  end if;

  -- An element not applied answers 'x'; an element repeating an applied one's (id, execution)
  -- answers as that one did (the row is updated once). The answers of updated and moved rows,
  -- both present, are in input order only once merged here.
  if v_applied + coalesce(cardinality(v_moved_ords), 0) < cardinality(p_ids) or (v_applied > 0 and v_moved_ords is not null) then
    select string_agg(coalesce(a.answer, 'x'), '' order by i.ord) into v_answer
    from unnest(p_ids, p_executions) with ordinality as i(id, execution, ord)
    left join (select p_ids[o.ord] as id, p_executions[o.ord] as execution, o.answer
               from unnest(v_ords, string_to_array(v_answer, null)) as o(ord, answer)) a
      on a.id = i.id and a.execution = i.execution;
  end if;
  if v_keys is not null or v_lanes is not null or v_shut_keys is not null then
    select array_agg(g.kind), array_agg(g.key) into v_gate_kinds, v_gate_keys
    from (select 'concurrency' as kind, k.key from unnest(v_keys) as k(key)
          union select 'lane', k.key from unnest(v_lanes) as k(key)
          union select 'rate', k.key from unnest(v_shut_keys) as k(key)) g;
  end if;

  -- A finished child tells its parent (parents locked in id order), before any gate lock is
  -- taken: row locks come first (acta.gate_lock, "Lock order"; acta.cancel_job, "Locks").
  if v_parents is not null then
    perform acta.tell_parents(v_parents, v_parent_failed);
  end if;
  if v_gate_kinds is not null then
    -- Gate locks in increasing order (acta.gate_lock); this call holds none before. One
    -- statement: the sorted array, then the locks taken along it in its order.
    perform pg_advisory_xact_lock(l.lock)
    from unnest(array(select acta.gate_lock(v_namespace, g.kind, g.key)
                      from unnest(v_gate_kinds, v_gate_keys) as g(kind, key)
                      order by 1)) as l(lock);
    -- A meter held shut for the retry's delay: a claim refuses its rows until then, and its parked
    -- rows are reconsidered then (acta.gate_room, acta.release_gate). Counted from a clock read
    -- under the gate's lock, so no earlier than the ledger's finished_at + the delay, nor than the
    -- row's run_at; a claim compares it with its own admission instant, also read under that lock
    -- (test/faults/policies.test.ts, the rate meter shared by three processes).
    if v_shut_keys is not null then
      insert into acta.gates as g (namespace, kind, key, shut_until)
      select v_namespace, 'rate', s.key, max(clock_timestamp() + s.ms * interval '1 millisecond')
      from unnest(v_shut_keys, v_shut_ms) as s(key, ms)
      where s.key is not null
      group by s.key
      on conflict (namespace, kind, key) do update set shut_until = greatest(g.shut_until, excluded.shut_until);
    end if;
    -- A key or a meter has parked rows only while its gate row exists (acta.release_gate keeps
    -- it so, under the lock held here); a lane's are found by acta.release_gate itself.
    for v_gate in
      select g.kind, g.key
      from unnest(v_gate_kinds, v_gate_keys) as g(kind, key)
      where g.kind = 'lane'
         or exists (select 1 from acta.gates x where x.namespace = v_namespace and x.kind = g.kind and x.key = g.key)
    loop
      if acta.release_gate(v_namespace, v_gate.kind, v_gate.key) > 0 then
        v_released := true;
      end if;
    end loop;
  end if;
  -- Recurring fire (docs/schedules.md): a schedule's armed fire that ended for good (a retry is
  -- still the same fire) records its outcome on the schedule and arms the next instant the worker
  -- computed from the fire's scheduled instant (p_next_fires[i]; later than it), unless the
  -- schedule is paused or removed. Changed while this fire ran (next_fire_at is no longer its
  -- instant; docs/schedules.md, "Changes"): the worker's instant was computed from the old spec, so
  -- it arms the pending instant the schedules pass stored (acta.arm_schedules) instead, or, none
  -- stored yet, nothing (the pass arms the new spec's next instant after now()). A fire that is no
  -- longer armed but is the schedule's last fire (retried by hand: acta.jobs retry) updates the
  -- last outcome only (test/recurring/runtime.test.ts, "last outcome"). One fire per instant:
  -- jobs_schedule_fire_idx.
  if v_fires is not null then
    -- Their schedules locked first, so the statement below (a new snapshot) sees a pause, change or
    -- removal committed while this call waited: it arms nothing for one (test/recurring/schedules.test.ts).
    -- (By key, from an array: a join's plan under the SET clauses is priced past JIT's threshold.)
    perform 1 from acta.schedules s
    where s.namespace = v_namespace and s.name = any (array(select j.schedule from acta.jobs j where j.id = any (v_fires)))
    order by s.name
    for update of s;
    -- The schedule's last fire, ended again after a retry by hand (not its armed fire, recorded
    -- next, which then becomes the last; a fire not armed is never skipped): its outcome as it is now.
    update acta.schedules s
    set last_outcome = j.status, updated_at = now()
    from acta.jobs j
    where j.id = any (v_fires) and s.namespace = j.namespace and s.name = j.schedule
      and s.last_job_id = j.id and s.job_id is distinct from j.id;
    with ended as (
      select j.id, j.namespace, j.schedule, j.scheduled_at, n.next_at,
             case when n.outcome = 'skipped' then 'skipped' else j.status end as outcome
      from acta.jobs j
      join unnest(p_ids, p_outcomes, p_next_fires) as n(id, outcome, next_at) on n.id = j.id
      where j.id = any (v_fires)
    ),
    coming as (
      select e.namespace, e.schedule, s.definition, s.payload, s.priority, s.concurrency_key, s.rate_key, s.lane,
             case when s.next_fire_at = e.scheduled_at then e.next_at else s.next_fire_at end as at, e.scheduled_at
      from ended e
      join acta.schedules s on s.namespace = e.namespace and s.name = e.schedule and s.job_id = e.id
      where not s.paused
    ),
    armed as (
      insert into acta.jobs (namespace, definition, payload, priority, run_at, schedule, scheduled_at, concurrency_key, rate_key, lane)
      select n.namespace, n.definition, n.payload, n.priority, n.at, n.schedule, n.at, n.concurrency_key, n.rate_key, n.lane
      from coming n
      where n.at > n.scheduled_at
      on conflict (namespace, schedule, scheduled_at) where schedule is not null do nothing
      returning id, namespace, schedule, scheduled_at
    )
    update acta.schedules s
    set job_id = a.id, next_fire_at = a.scheduled_at,
        last_fire_at = e.scheduled_at, last_job_id = e.id, last_outcome = e.outcome, updated_at = now()
    from ended e
    left join armed a on a.namespace = e.namespace and a.schedule = e.schedule
    where s.namespace = e.namespace and s.name = e.schedule and s.job_id = e.id;
    v_released := true;
  end if;
  -- A parked row whose wait is answered already runs again, read after the park with a new
  -- snapshot (acta.settle_waits).
  if strpos(v_answer, 'w') > 0 then
    perform acta.settle_waits(p_ids);
  end if;
  -- Retention zero: what refers to the rows `gone` deleted goes with them (acta.delete_job_references),
  -- and a fire this call ended Succeeded goes now, last, once every step above has read it, through
  -- the one deleter. Left to the pass: a child and a watched row (see `gone`).
  if v_gone is not null then
    perform acta.delete_job_references(v_gone);
  end if;
  if v_zero and v_fires is not null and strpos(v_answer, 's') > 0 then
    perform acta.delete_jobs(array(select j.id from acta.jobs j
                                   where j.id = any (v_fires) and j.status = 'succeeded'
                                     and j.finished_at = now() and j.parent_id is null and not j.watched));
  end if;
  -- Rows back to Ready (a hand-back, a retry) or released from a gate wake the namespace's idle
  -- workers, as an enqueue does; a woken worker sleeps until a retry that is due later. Nothing to
  -- do for successes alone.
  if strpos(v_answer, 'r') > 0 or v_released then
    perform pg_notify('acta_jobs', w.namespace) from acta.workers w where w.id = p_worker;
  end if;
  return coalesce(v_answer, '');
end
$$;
