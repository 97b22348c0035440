-- acta.recheck_gates: after a change of the named definitions' policies, have the next claim
-- recheck the concurrency keys and rate meters their rows are parked at (docs/policies.md,
-- "Policies through deploys"; test/ledger/contract.ts, "a rate limit raised by a deploy").
--
-- Contract: each gate of kind 'concurrency' or 'rate' of p_namespace whose recheck is still to come
-- and at which a Ready row of p_names is parked gets recheck_at now(): acta.claim_jobs releases what
-- it has room for under the limits that apply now (acta.release_gate), and sets the recheck again
-- when rows stay parked. NOTIFY acta_jobs with p_namespace when it moved one: an idle worker waits
-- for the recheck it was told of. Without it a limit raised or dropped by a deploy reached those rows only at
-- the old limit's recheck: a meter's next token under the old limit, up to its whole window away.
-- Called by: acta.register_worker, acta.stop_worker and acta.recover_jobs, last, when the namespace's
-- policy version moved (a policy changed): rare, off the claim and completion paths.
-- Locks: gate rows, taken FOR UPDATE SKIP LOCKED, and nothing is waited for after them in the
-- caller: a claim, a completion or a recovery pass writes a gate row holding that gate's lock
-- (acta.gate_lock), so waiting for one here could wait on a transaction that waits for a lock the
-- caller holds. A gate skipped is being released by such a transaction at that moment.
-- Plan: gates_recheck_idx, then jobs_parked_idx per gate.
create or replace function acta.recheck_gates(p_namespace text, p_names text[]) returns void
language plpgsql
as $$
begin
  update acta.gates g set recheck_at = now()
  where (g.namespace, g.kind, g.key) in (
    select x.namespace, x.kind, x.key
    from acta.gates x
    where x.namespace = p_namespace and x.recheck_at > now() and x.kind in ('concurrency', 'rate')
      and exists (select 1 from acta.jobs p
                  where p.namespace = p_namespace and p.blocked_by = x.kind
                    and (case p.blocked_by when 'rate' then p.rate_key else p.concurrency_key end) = x.key
                    and p.status = 'ready' and p.definition = any (p_names))
    order by x.kind, x.key
    for update skip locked
  );
  if found then
    perform pg_notify('acta_jobs', p_namespace);
  end if;
end
$$;
