-- acta.take_recovery_pass: take the namespace's recovery pass when it is due (docs/DESIGN.md,
-- "The lease clock": recovery interval = lease).
--
-- Contract: returns true when this call took it: the pass's clock moved one lease on in the same
-- statement, so exactly one worker takes each pass (test/faults/recovery.test.ts). Called by
-- acta.register_worker (a starting worker's registration is its first beat) and acta.heartbeat.
-- Mixed leases: a worker with a shorter lease than the one that set the next pass pulls it in,
-- so in a namespace of mixed heartbeat intervals the pass runs every shortest lease; that update
-- changes the row only when it moves the time earlier. STRICT: a null lease takes nothing (null).
-- Locks: the namespace row, when either update changes it.
create or replace function acta.take_recovery_pass(p_namespace text, p_lease_ms integer) returns boolean
language plpgsql strict as $$
begin
  update acta.namespaces n
  set recovery_due_at = now() + p_lease_ms * interval '1 millisecond'
  where n.name = p_namespace and n.recovery_due_at > now() + p_lease_ms * interval '1 millisecond';

  update acta.namespaces n
  set recovery_due_at = now() + p_lease_ms * interval '1 millisecond'
  where n.name = p_namespace and n.recovery_due_at <= now();
  return found;
end
$$;
