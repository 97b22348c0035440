-- acta.gate_room: how many more attempts a concurrency key or a rate meter admits now, for the
-- limits of one definition (docs/DESIGN.md, "Policies"; migration 0008).
--
-- Contract: 'concurrency': room = the definition's concurrency_limit less the key's attempts that
-- hold a slot, i.e. its Executing rows, leases expired or not: a slot is freed only by the attempt's
-- completion or by the recovery pass that returns its row (so a crash frees it within lease +
-- recovery interval, and a stalled holder that wakes up still owns the slot it renews); next_at =
-- now() + the bounce (2 s), when a refused row is reconsidered. 'rate': room = the rate_limit less
-- the meter's start times within the last rate_per_ms (a sliding log: no window of rate_per_ms ever
-- holds more than rate_limit starts), or 0 while the meter is held shut (ctx.rateLimited); next_at =
-- when one token more than the room frees (or the meter opens). room null: the definition sets no
-- limit.
-- Times are now(), the calling transaction's start, as the claim stamps the meter.
-- Caller: holds the gate's lock (acta.gate_lock) when the answer decides an admission.
-- Plan: a count along jobs_key_held_idx; the meter's row by primary key.
create or replace function acta.gate_room(p_namespace text, p_kind text, p_key text, p_definition text,
                                          out room integer, out next_at timestamptz)
language plpgsql stable
set enable_seqscan = off
as $$
declare
  v_limit integer;
  v_per   integer;
  v_shut  timestamptz;
  v_stamps timestamptz[];
  v_in_window timestamptz[];
begin
  if p_kind = 'concurrency' then
    select d.concurrency_limit into v_limit
    from acta.definitions d where d.namespace = p_namespace and d.name = p_definition;
    if v_limit is null then
      return;
    end if;
    room := v_limit - (select count(*) from acta.jobs e
                       where e.namespace = p_namespace and e.concurrency_key = p_key and e.status = 'executing');
    next_at := now() + interval '2 seconds';
    return;
  end if;
  select d.rate_limit, d.rate_per_ms into v_limit, v_per
  from acta.definitions d where d.namespace = p_namespace and d.name = p_definition;
  select g.shut_until, g.stamps into v_shut, v_stamps
  from acta.gates g where g.namespace = p_namespace and g.kind = 'rate' and g.key = p_key;
  if v_shut > now() then
    room := 0;
    next_at := v_shut;
    return;
  end if;
  if v_limit is null then
    return;
  end if;
  v_in_window := array(select s from unnest(v_stamps) as s where s > now() - v_per * interval '1 millisecond' order by s);
  room := v_limit - cardinality(v_in_window);
  -- The token after the room: when the start that must leave the window for it does (now() + the
  -- window when the log is empty).
  next_at := coalesce(v_in_window[greatest(1, cardinality(v_in_window) - v_limit + 1)], now()) + v_per * interval '1 millisecond';
end
$$;
