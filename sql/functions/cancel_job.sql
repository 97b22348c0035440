-- acta.cancel_job: cancel one job of a namespace: a Ready one (queued, due later, waiting out a
-- retry's backoff, or parked on a gate) at once, an Executing one through its worker.
--
-- Contract: 'cancelled' when this call moved a Ready or Waiting row to Cancelled (finished on the
-- database clock read once the row is locked: after its last attempt's end and its creation, even in
-- a caller's transaction; docs/decisions/2026-12-05-ledger-times.md); 'requested' when the row is Executing: its cancel_requested_at is set (kept
-- if set already) and NOTIFY acta_jobs 'cancel:<lease holder>:<id>:<execution>' tells its worker
-- (on the channel it listens on for wakeups), which aborts the handler; the attempt's completion or recovery then ends the job Cancelled unless it
-- succeeded (acta.complete_executions, acta.recover_jobs; its heartbeat repeats the request:
-- acta.heartbeat). null when there is no such job or it has finished. A claim holding the row's
-- lock is waited for, and then the row is Executing: 'requested'.
-- A cancelled row of a lane hands the lane on if it was its head, parked on a key or a meter or not
-- (acta.release_gate; docs/DESIGN.md, "Policies"), with NOTIFY acta_jobs when it released a row.
-- Workflows (docs/workflows.md): a cancelled child tells its parent (acta.tell_parents); a parent
-- cancelled or asked to cancel cancels its unfinished children the same way, in id order.
-- Locks: the job's unfinished descendants, deepest first then by id, then the row itself (a
-- family's order: a child before its parent, as a child's completion locks the child and then its
-- parent: acta.complete_executions, acta.tell_parents; test/db/workflowLocks.test.ts). A child
-- spawned between the two (spawning needs the parent's lock) undoes them in a subtransaction and
-- they are taken again. Then the parent a cancelled child tells, then its lane's gate lock. No
-- deadlock: whoever holds that gate lock never waits for a Ready row's lock (claims skip locked
-- rows, acta.release_gate takes parked ones SKIP LOCKED).
drop function if exists acta.cancel_job(text, bigint);
create or replace function acta.cancel_job(p_namespace text, p_id bigint) returns text
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_lane      text;
  v_holder    uuid;
  v_execution integer;
  v_parent    bigint;
  v_fail_parent boolean;
  v_children  integer;
  v_family    bigint[];
begin
  loop
    begin
      v_family := acta.job_descendants(p_id);
      perform 1 from acta.jobs d join unnest(v_family) with ordinality as f(id, ord) on d.id = f.id
      order by f.ord for update of d;
      perform 1 from acta.jobs j where j.id = p_id for update;
      exit when acta.job_descendants(p_id) <@ v_family;
      raise exception 'a child was spawned while its family was locked' using errcode = 'AC001';
    exception when sqlstate 'AC001' then
      null;
    end;
  end loop;
  update acta.jobs j set status = 'cancelled', finished_at = clock_timestamp(), wait_names = null, wait_step = null, wait_until = null
  where j.id = p_id and j.namespace = p_namespace and j.status in ('ready', 'waiting')
  returning j.lane, j.parent_id, j.fail_parent, j.children_open into v_lane, v_parent, v_fail_parent, v_children;
  if not found then
    update acta.jobs j set cancel_requested_at = coalesce(j.cancel_requested_at, statement_timestamp())
    where j.id = p_id and j.namespace = p_namespace and j.status = 'executing'
    returning j.lease_holder, j.execution, j.children_open into v_holder, v_execution, v_children;
    if not found then
      return null;
    end if;
    perform pg_notify('acta_jobs', 'cancel:' || v_holder::text || ':' || p_id || ':' || v_execution);
    if v_children > 0 then
      perform acta.cancel_job(p_namespace, c.id) from acta.jobs c
      where c.parent_id = p_id and c.status in ('ready', 'waiting', 'executing') order by c.id;
    end if;
    return 'requested';
  end if;
  -- A cancelled child tells its parent; a cancelled parent cancels its unfinished children.
  if v_parent is not null then
    perform acta.tell_parents(array[v_parent], array[coalesce(v_fail_parent, false)]);
  end if;
  if v_children > 0 then
    perform acta.cancel_job(p_namespace, c.id) from acta.jobs c
    where c.parent_id = p_id and c.status in ('ready', 'waiting', 'executing') order by c.id;
  end if;
  if v_lane is not null then
    perform pg_advisory_xact_lock(acta.gate_lock(p_namespace, 'lane', v_lane));
    if acta.release_gate(p_namespace, 'lane', v_lane) > 0 then
      perform pg_notify('acta_jobs', p_namespace);
    end if;
  end if;
  return 'cancelled';
end
$$;
