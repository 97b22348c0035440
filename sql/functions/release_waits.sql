-- acta.release_waits: the namespace's signal waits whose timeout has passed run again.
--
-- Contract: each Waiting row of p_namespace whose timeout passed (wait_until <= now()) wakes with
-- {timedOut: true} (acta.wake_job): its waitForSignal call then throws SignalTimeoutError. At
-- most p_limit rows a call. Called by acta.heartbeat, so a timeout is honoured within one
-- heartbeat interval of its due time (docs/workflows.md). Returns how many rows it woke.
-- Locks: the due rows, SKIP LOCKED (a row being signalled right now is left to its signal).
-- Plan: jobs_waits_due_idx (only Waiting rows are in it).
create or replace function acta.release_waits(p_namespace text, p_limit integer default 1000) returns integer
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_id bigint;
  v_n  integer := 0;
begin
  for v_id in
    select j.id from acta.jobs j
    where j.namespace = p_namespace and j.status = 'waiting' and j.wait_until <= now()
    order by j.wait_until, j.id
    limit p_limit
    for update skip locked
  loop
    perform acta.wake_job(v_id, '{"timedOut": true}'::jsonb);
    v_n := v_n + 1;
  end loop;
  return v_n;
end
$$;
