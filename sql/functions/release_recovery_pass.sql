-- acta.release_recovery_pass: give back a pass a worker's registration took, or may have taken (a
-- repeated registration answers true without knowing: acta.register_worker), that the worker will
-- not run because it was stopped before its pipeline started: the pass is due again at once, for
-- the next beat or registration of any worker, instead of a lease later
-- (test/faults/recovery.test.ts; docs/decisions/2026-12-01-registration-is-the-first-beat.md).
-- Only moves the time earlier: at worst one more pass runs soon, and a pass is a sweep that may
-- run any time. Locks: the namespace row, when it changes it.
create or replace function acta.release_recovery_pass(p_namespace text) returns void
language sql as $$
  update acta.namespaces set recovery_due_at = now() where name = p_namespace and recovery_due_at > now();
$$;
