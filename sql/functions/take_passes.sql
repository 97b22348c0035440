-- acta.take_passes: take the namespace's periodic passes that are due (docs/DESIGN.md, "The lease
-- clock" and "Workflows"; migration 0007).
--
-- Contract: p_passes are the passes the calling worker runs, p_intervals_ms their intervals in the
-- same order (recovery: the worker's lease). Returns the names this call took: each one's due time
-- moved one interval on in the same statement, so exactly one worker takes each pass
-- (test/faults/recovery.test.ts). A pass the namespace has no row for yet is created due at once.
-- Called by acta.register_worker (a starting worker's registration is its first beat) and
-- acta.heartbeat.
-- Mixed intervals: a worker whose interval is shorter than the one that set a pass's next due time
-- pulls it in, so in a namespace of mixed heartbeat intervals recovery runs every shortest lease;
-- that update changes a row only when it moves the time earlier.
-- Locks: each pass row the updates change; the namespace row is only read (the foreign key).
create or replace function acta.take_passes(p_namespace text, p_passes text[], p_intervals_ms integer[]) returns setof text
language plpgsql as $$
begin
  insert into acta.passes (namespace, pass)
  select p_namespace, p.pass from unnest(p_passes) as p(pass)
  on conflict (namespace, pass) do nothing;

  update acta.passes s
  set due_at = now() + p.ms * interval '1 millisecond'
  from rows from (unnest(p_passes), unnest(p_intervals_ms)) as p(pass, ms)
  where s.namespace = p_namespace and s.pass = p.pass and s.due_at > now() + p.ms * interval '1 millisecond';

  return query
  update acta.passes s
  set due_at = now() + p.ms * interval '1 millisecond'
  from rows from (unnest(p_passes), unnest(p_intervals_ms)) as p(pass, ms)
  where s.namespace = p_namespace and s.pass = p.pass and s.due_at <= now()
  returning s.pass;
end
$$;
