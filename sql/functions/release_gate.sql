-- acta.release_gate: release, in order, as many of a gate's parked rows as it has room for now,
-- and set when the rest are reconsidered (docs/DESIGN.md, "Policies"; migration 0008).
--
-- Contract: 'lane': when nothing of the lane is Executing or Waiting, its first Ready row (by
-- lane_seq: the lane's order, commit order; migration 0012; a schedule's armed fire not yet due
-- left out, docs/policies.md, "Lanes") is its head; parked for the lane, it is released (a head parked on a key or a
-- meter waits for that gate). A head another transaction holds (only a cancel can: every other
-- write of a parked row holds its gate's lock) is left to it, and the lane gets a recheck after the
-- bounce, in case that transaction rolls back; a lane's gate row exists only for that. 'concurrency' / 'rate': the first parked rows in claim order
-- (priority, due time, id), as many as acta.gate_room gives for the first one's definition; when
-- rows stay parked the gate's recheck_at is gate_room's next_at (the bounce; the next free token),
-- else it is cleared (a key's gate row is deleted; a meter's keeps its start times). A released
-- row is Ready and claimable again, with its place unchanged. Returns how many rows it released.
-- Called by: acta.claim_jobs (a recheck that has come; each gate it parked rows on),
-- acta.complete_executions and acta.recover_jobs (the hand-on: the gates of the attempts they end),
-- acta.cancel_job (a lane whose head is cancelled).
-- Caller: holds the gate's lock (acta.gate_lock). Wakeup: the caller's (a released row is due now).
-- Locks: never waits for a row: parked rows are taken FOR UPDATE SKIP LOCKED (see Contract), so a
-- cancel holding one may wait for this gate's lock (acta.cancel_job).
-- Plan: jobs_lane_held_idx and jobs_lane_ready_idx for a lane; jobs_parked_idx for a key or meter.
create or replace function acta.release_gate(p_namespace text, p_kind text, p_key text) returns integer
language plpgsql
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_head       bigint;
  v_head_gate  text;
  v_definition text;
  v_room       integer;
  v_next_at    timestamptz;
  v_released   integer := 0;
begin
  if p_kind = 'lane' then
    if not exists (select 1 from acta.jobs h
                   where h.namespace = p_namespace and h.lane = p_key and h.status in ('executing', 'waiting')) then
      select r.id, r.blocked_by into v_head, v_head_gate
      from acta.jobs r
      where r.namespace = p_namespace and r.lane = p_key and r.status = 'ready'
        and not (r.schedule is not null and r.execution = 0 and r.run_at > now())
      order by r.lane_seq limit 1;
      if v_head_gate = 'lane' then
        update acta.jobs j set blocked_by = null
        where j.id = (select x.id from acta.jobs x where x.id = v_head and x.blocked_by = 'lane' for update skip locked);
        get diagnostics v_released = row_count;
        if v_released = 0 then
          insert into acta.gates (namespace, kind, key, recheck_at)
          values (p_namespace, 'lane', p_key, now() + interval '2 seconds')
          on conflict (namespace, kind, key) do update set recheck_at = excluded.recheck_at;
          return 0;
        end if;
      end if;
    end if;
    delete from acta.gates g where g.namespace = p_namespace and g.kind = 'lane' and g.key = p_key;
    return v_released;
  end if;

  select p.definition into v_definition
  from acta.jobs p
  where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
    and p.blocked_by = p_kind and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = p_key
  order by p.priority desc, p.run_at, p.id
  limit 1;
  if v_definition is not null then
    select r.room, r.next_at into v_room, v_next_at from acta.gate_room(p_namespace, p_kind, p_key, v_definition, now()) as r;
    -- No limit (any more): release in chunks of 1,000, the rest at the next recheck.
    with released as (
      update acta.jobs j set blocked_by = null
      where j.id = any (array(
        select p.id from acta.jobs p
        where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
          and p.blocked_by = p_kind and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = p_key
        order by p.priority desc, p.run_at, p.id
        limit greatest(coalesce(v_room, 1000), 0)
        for update skip locked))
      returning 1
    )
    select count(*) into v_released from released;
  end if;

  if exists (select 1 from acta.jobs p
             where p.namespace = p_namespace and p.status = 'ready' and p.blocked_by in ('concurrency', 'rate')
               and p.blocked_by = p_kind and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = p_key) then
    insert into acta.gates (namespace, kind, key, recheck_at)
    values (p_namespace, p_kind, p_key, coalesce(v_next_at, now() + interval '2 seconds'))
    on conflict (namespace, kind, key) do update set recheck_at = excluded.recheck_at;
  elsif p_kind = 'concurrency' then
    delete from acta.gates g where g.namespace = p_namespace and g.kind = 'concurrency' and g.key = p_key;
  else
    update acta.gates g set recheck_at = null
    where g.namespace = p_namespace and g.kind = 'rate' and g.key = p_key and g.recheck_at is not null;
  end if;
  return v_released;
end
$$;
