-- acta.refresh_definitions: set the named definitions' policy in acta.definitions to what the
-- namespace's live workers declare (docs/DESIGN.md, "Policies"; migration 0008): the declaration
-- of the most recently started live worker running it (timeout, attempts, backoff, fair order,
-- the build it came from), except that while live workers disagree the smallest concurrency limit
-- and the smallest rate limit over the longest rate window that any of them declared apply: no
-- build ever sees more attempts of a key, or more starts of a meter in its own window, than its
-- own declaration allows (test/faults/policies.test.ts). Not the slowest declared rate: 10 per
-- 5 s is slower than 3 per 1 s, yet lets 10 start in one second (test/ledger/contract.ts,
-- "builds whose rates differ in limit and window"). A definition no live worker runs keeps its last policy. Workers
-- registered before migration 0004 declared nothing and are skipped; those before 0008, only
-- maxAttempts. Bumps the namespace's policy_version when a policy changed (the heartbeat reports
-- it and workers reload), and then reconciles the declared schedules (acta.reconcile_schedules). Called by acta.register_worker, acta.stop_worker and acta.recover_jobs
-- (a worker marked dead): rare, off the claim and completion paths.
-- A definition that is not fair (any more) has no row with a fair turn: a plain claim takes only
-- untagged rows (jobs_due_idx), so a row that took its turn while the definition was fair (tagged
-- by a fair claim, then parked and released, handed back, returned by recovery) waited for ever
-- once a deploy turned fair order off (test/ledger/contract.ts, "fair order turned off"). Its Ready
-- rows lose their turn at every refresh (jobs_fair_key_idx: none, usually), and when fair order
-- is turned off its Executing and Waiting ones too, which come back Ready with it.
-- Locks: the acta.definitions rows it updates, in name order (as acta.register_worker takes them);
-- the namespace's row when a policy changed; the rows that lose their turn, in id order.
create or replace function acta.refresh_definitions(p_namespace text, p_names text[])
returns void
language plpgsql as $$
declare
  v_changed  integer;
  v_was_fair text[];
  v_name     text;
begin
  perform 1 from acta.definitions d
  where d.namespace = p_namespace and d.name = any (p_names)
  order by d.name
  for update;
  v_was_fair := array(select d.name from acta.definitions d where d.namespace = p_namespace and d.name = any (p_names) and d.fair);
  with live as (
    select x.name, x.max_attempts, w.started_at, w.build, w.policies -> x.name as policy
    from acta.workers w
    cross join lateral unnest(w.definitions, w.max_attempts) as x(name, max_attempts)
    where w.namespace = p_namespace and w.status = 'alive' and w.max_attempts is not null
      and x.name = any (p_names)
  ),
  newest as (
    select distinct on (l.name) l.* from live l order by l.name, l.started_at desc
  ),
  strictest as (
    select l.name,
           min((l.policy -> 'concurrency' ->> 'limit')::integer) as concurrency_limit,
           (select array[min((s.policy -> 'rate' ->> 'limit')::integer), max((s.policy -> 'rate' ->> 'perMs')::integer)]
            from live s
            where s.name = l.name and jsonb_typeof(s.policy -> 'rate') = 'object'
            having count(*) > 0) as rate
    from live l
    group by l.name
  ),
  policy as (
    select n.name, n.max_attempts, (n.policy ->> 'timeoutMs')::integer as timeout_ms,
           s.concurrency_limit, s.rate[1] as rate_limit, s.rate[2] as rate_per_ms,
           coalesce((n.policy ->> 'fair')::boolean, false) as fair, n.build, n.policy, n.started_at
    from newest n join strictest s on s.name = n.name
  )
  update acta.definitions d
  set max_attempts = p.max_attempts, timeout_ms = p.timeout_ms, concurrency_limit = p.concurrency_limit,
      rate_limit = p.rate_limit, rate_per_ms = p.rate_per_ms, fair = p.fair, build = p.build, policy = p.policy,
      registered_at = p.started_at
  from policy p
  where d.namespace = p_namespace and d.name = p.name
    and (d.max_attempts, d.timeout_ms, d.concurrency_limit, d.rate_limit, d.rate_per_ms, d.fair, d.build, d.policy)
        is distinct from (p.max_attempts, p.timeout_ms, p.concurrency_limit, p.rate_limit, p.rate_per_ms, p.fair, p.build, p.policy);
  get diagnostics v_changed = row_count;
  for v_name in select d.name from acta.definitions d where d.namespace = p_namespace and d.name = any (p_names) and not d.fair order by d.name loop
    update acta.jobs j set fair_tag = null
    where j.id = any (array(
      select r.id from acta.jobs r
      where hashtextextended(r.namespace || '/' || r.definition, 0) = hashtextextended(p_namespace || '/' || v_name, 0)
        and r.namespace = p_namespace and r.definition = v_name and r.status = 'ready' and r.fair_tag is not null
      order by r.id
      for update));
    if v_name = any (v_was_fair) then
      update acta.jobs j set fair_tag = null
      where j.id = any (array(
        select r.id from acta.jobs r
        where r.namespace = p_namespace and r.status in ('executing', 'waiting') and r.definition = v_name and r.fair_tag is not null
        order by r.id
        for update));
    end if;
  end loop;
  if v_changed > 0 then
    update acta.namespaces set policy_version = policy_version + 1 where name = p_namespace;
    perform acta.reconcile_schedules(p_namespace, p_names);
  end if;
end
$$;
