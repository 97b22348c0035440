-- acta.stop_worker: mark a worker incarnation stopped after a graceful shutdown (its rows have
-- been completed or handed back by then). Returns whether the worker row existed. Its definitions'
-- policies go back to the newest live worker running them (acta.refresh_definitions), so a canary
-- that declared another maxAttempts and stopped leaves no value to recovery
-- (test/faults/recovery.test.ts, "a stopped or dead worker's maxAttempts gives way").
-- A policy that changed applies at once to the rows parked under the old one (acta.recheck_gates).
-- Locks: the worker's row; the acta.definitions rows it updates, in name order; then gate rows
-- (acta.recheck_gates), last.
create or replace function acta.stop_worker(p_worker uuid) returns boolean
language plpgsql as $$
declare
  v_namespace   text;
  v_definitions text[];
  v_version     bigint;
begin
  update acta.workers set status = 'stopped', stopped_at = now() where id = p_worker
  returning namespace, definitions into v_namespace, v_definitions;
  if not found then
    return false;
  end if;
  select n.policy_version into v_version from acta.namespaces n where n.name = v_namespace;
  perform acta.refresh_definitions(v_namespace, v_definitions);
  if exists (select 1 from acta.namespaces n where n.name = v_namespace and n.policy_version is distinct from v_version) then
    perform acta.recheck_gates(v_namespace, v_definitions);
  end if;
  return true;
end
$$;
