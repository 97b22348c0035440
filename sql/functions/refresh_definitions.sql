-- acta.refresh_definitions: after workers of a namespace stopped or were marked dead, set each of
-- the named definitions' policy in acta.definitions to what the most recently started worker
-- still alive that runs it declared (migration 0004). A definition no live worker runs keeps its
-- last declaration. Workers registered before migration 0004 declared nothing and are skipped.
-- Called by acta.stop_worker and acta.recover_jobs: rare, off the claim and completion paths
-- (test/faults/recovery.test.ts, "a stopped or dead worker's maxAttempts gives way").
-- Locks: the acta.definitions rows it updates, in name order (as acta.register_worker takes them).
create or replace function acta.refresh_definitions(p_namespace text, p_names text[])
returns void
language plpgsql as $$
begin
  update acta.definitions d
  set max_attempts = l.max_attempts, registered_at = l.started_at
  from (
    select distinct on (x.name) x.name, x.max_attempts, w.started_at
    from acta.workers w
    cross join lateral unnest(w.definitions, w.max_attempts) as x(name, max_attempts)
    where w.namespace = p_namespace and w.status = 'alive' and w.max_attempts is not null
      and x.name = any (p_names)
    order by x.name, w.started_at desc
  ) l
  where d.namespace = p_namespace and d.name = l.name
    and d.max_attempts is distinct from l.max_attempts;
end
$$;
