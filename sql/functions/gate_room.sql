-- acta.gate_room: how many more attempts a concurrency key or a rate meter admits at p_at, for the
-- limits of one definition (docs/DESIGN.md, "Policies"; migrations 0008, 0011).
--
-- Contract: 'concurrency': room = the definition's concurrency_limit less the key's attempts that
-- hold a slot, i.e. its Executing rows, leases expired or not: a slot is freed only by the attempt's
-- completion or by the recovery pass that returns its row (so a crash frees it within lease +
-- recovery interval, and a stalled holder that wakes up still owns the slot it renews); next_at =
-- p_at + the bounce (2 s), when a refused row is reconsidered. 'rate': room = the rate_limit less
-- the meter's starts after p_at - rate_per_ms (a sliding window: no window of rate_per_ms ever holds
-- more than rate_limit starts), or 0 while the meter is held shut (ctx.rateLimited); next_at = when
-- one token more than the room frees (or the meter opens). room null: the definition sets no limit.
-- The starts after an instant: the meter's count (acta.gates.starts) less the count of its last
-- acta.meter_starts row at or before it (the claims keep one such row per meter: acta.claim_jobs;
-- before it, starts_pruned).
-- p_at: the claim passes its admission instant, which it also records on the meter and on the rows
-- it admits (claimed_at; acta.claim_jobs); acta.release_gate passes now().
-- Caller: holds the gate's lock (acta.gate_lock) when the answer decides an admission.
-- Plan: a count along jobs_key_held_idx; the meter's row by primary key, then at most two probes of
-- acta.meter_starts (its primary key, meter_starts_upto_idx): the same cost whatever the window holds.
drop function if exists acta.gate_room(text, text, text, text);
create or replace function acta.gate_room(p_namespace text, p_kind text, p_key text, p_definition text, p_at timestamptz,
                                          out room integer, out next_at timestamptz)
language plpgsql stable
set enable_seqscan = off
set jit = off
as $$
declare
  v_limit   integer;
  v_per     interval;
  v_shut    timestamptz;
  v_starts  bigint;
  v_pruned  bigint;
  v_before  bigint;
begin
  if p_kind = 'concurrency' then
    select d.concurrency_limit into v_limit
    from acta.definitions d where d.namespace = p_namespace and d.name = p_definition;
    if v_limit is null then
      return;
    end if;
    room := v_limit - (select count(*) from acta.jobs e
                       where e.namespace = p_namespace and e.concurrency_key = p_key and e.status = 'executing');
    next_at := p_at + interval '2 seconds';
    return;
  end if;
  select d.rate_limit, d.rate_per_ms * interval '1 millisecond' into v_limit, v_per
  from acta.definitions d where d.namespace = p_namespace and d.name = p_definition;
  select g.shut_until, g.starts, g.starts_pruned into v_shut, v_starts, v_pruned
  from acta.gates g where g.namespace = p_namespace and g.kind = 'rate' and g.key = p_key;
  if v_shut > p_at then
    room := 0;
    next_at := v_shut;
    return;
  end if;
  if v_limit is null then
    return;
  end if;
  v_before := coalesce((select s.upto from acta.meter_starts s
                        where s.namespace = p_namespace and s.key = p_key and s.at <= p_at - v_per
                        order by s.at desc limit 1),
                       v_pruned, 0);
  room := v_limit - (coalesce(v_starts, 0) - v_before);
  -- The token after the room: when the start that must leave the window for it does, the one
  -- numbered rate_limit before the next (p_at + the window when the window is empty).
  next_at := coalesce((select s.at from acta.meter_starts s
                       where s.namespace = p_namespace and s.key = p_key and s.upto >= greatest(v_before + 1, v_starts - v_limit + 1)
                       order by s.upto limit 1),
                      p_at) + v_per;
end
$$;
