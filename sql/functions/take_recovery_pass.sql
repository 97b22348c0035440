-- acta.take_recovery_pass: take the namespace's recovery pass when it is due (shared/DESIGN.md,
-- "The lease clock": recovery interval = lease). Returns true when this call took it: the pass's
-- clock was moved one lease on in this same statement, so exactly one worker takes each pass.
-- Called by acta.register_worker (a starting worker's registration is its first beat: a fleet that
-- was down catches up at once) and by acta.heartbeat (every beat after it).
-- Mixed leases: a worker with a shorter lease than the one that set the next pass pulls it in. In
-- a namespace whose workers run different heartbeat intervals the pass runs every shortest lease,
-- so a row leased for 2 s is not left for the 180 s a default worker set (each row is still judged
-- by its own lease_expires_at). That update changes the row only when it moves the time earlier.
-- STRICT: a null lease takes nothing (null). Locks: the namespace row, when either update changes it.
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
