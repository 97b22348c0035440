-- acta.register_worker: put a new worker incarnation in the membership list (creating its
-- namespace on first use). Each process start registers a fresh id, so a restarted process
-- never renews its previous incarnation's rows. Returns the database clock's now().
-- Repeatable: the worker repeats the call when its answer is lost (a connection dropped after the
-- commit), and the id is this incarnation's own, so a row already there is that earlier call's.
create or replace function acta.register_worker(
  p_worker      uuid,
  p_namespace   text,
  p_hostname    text,
  p_pid         integer,
  p_definitions text[]
) returns timestamptz
language plpgsql as $$
begin
  insert into acta.namespaces (name) values (p_namespace) on conflict do nothing;
  insert into acta.workers (id, namespace, hostname, pid, definitions)
  values (p_worker, p_namespace, p_hostname, p_pid, p_definitions)
  on conflict (id) do nothing;
  return now();
end
$$;
