-- acta.tell_parents: children that ended tell their parents.
--
-- Contract: one element per ended child (succeeded, failed for good, cancelled or deleted):
-- p_parents[i] its parent, p_failed[i] true when it ended without success and was spawned
-- 'fail-parent'. Each parent's children_open drops by its children's count (never below 0), and
-- children_failed is set by a failed 'fail-parent' child; a parent Waiting for its children then
-- wakes (acta.wake_job) when none is open or one failed it. Called in the statement's transaction
-- that ended the children (acta.complete_executions, acta.cancel_job, acta.recover_jobs, the
-- delete trigger), so the last two children ending at once cannot strand their parent: each
-- decrement is made under the parent's row lock, and the one that reaches 0 sees the row Waiting,
-- or the parent's own park sees 0 (acta.settle_waits).
-- Locks: the parents FOR UPDATE in id order, after the caller's own rows: two batches never
-- deadlock over parents alone; one that ends a parent whose child the other ends can, and
-- PostgreSQL's detector breaks it (40P01, retried by the worker as transient).
-- Plan: by primary key.
create or replace function acta.tell_parents(p_parents bigint[], p_failed boolean[]) returns void
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_parent record;
begin
  perform 1 from acta.jobs j where j.id = any (p_parents) order by j.id for update;
  for v_parent in
    with ended as (
      select u.parent, count(*)::integer as n, bool_or(coalesce(u.failed, false)) as failed
      from unnest(p_parents, p_failed) as u(parent, failed)
      group by u.parent
    )
    update acta.jobs j
    set children_open = greatest(coalesce(j.children_open, 0) - e.n, 0),
        children_failed = case when e.failed then true else j.children_failed end
    from ended e
    where j.id = e.parent
    returning j.id, j.status, j.wait_names, j.wait_step, j.children_open, j.children_failed
  loop
    if v_parent.status = 'waiting' and v_parent.wait_names is null
       and (v_parent.children_open = 0 or coalesce(v_parent.children_failed, false)) then
      perform acta.wake_job(v_parent.id, '{}'::jsonb);
    end if;
  end loop;
end
$$;
