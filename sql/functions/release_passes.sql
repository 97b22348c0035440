-- acta.release_passes: give back passes a worker's registration took, or may have taken (a
-- repeated registration answers every pass without knowing: acta.register_worker), that the
-- worker will not run because it was stopped before its pipeline started: they are due again at
-- once, for the next beat or registration of any worker, instead of an interval later
-- (test/faults/recovery.test.ts; docs/decisions/2026-12-01-registration-is-the-first-beat.md).
-- Only moves a time earlier: at worst one more pass runs soon, and a pass is a sweep that may run
-- any time. Locks: each pass row it changes.
create or replace function acta.release_passes(p_namespace text, p_passes text[]) returns void
language sql as $$
  update acta.passes set due_at = now()
  where namespace = p_namespace and pass = any (p_passes) and due_at > now();
$$;
