-- acta.cancel_job: cancel one Ready job of a namespace (queued, due later, waiting out a retry's
-- backoff, or parked on a gate).
--
-- Contract: true when this call moved the row to Cancelled (finished at this statement's start on
-- the database clock, not its transaction's: in a caller's transaction now() could precede the
-- job's creation); false when there is no such job or it is not Ready (Executing, finished,
-- already Cancelled). A claim holding the row's lock is waited for, and then the row is Executing:
-- false. A cancelled row of a lane hands the lane on if it was its head, parked on a key or a meter
-- or not (acta.release_gate; docs/DESIGN.md, "Policies"), with NOTIFY acta_jobs when it released a
-- row.
-- Locks: the row, then its lane's gate lock. No deadlock: whoever holds that gate lock never waits
-- for a Ready row's lock (claims skip locked rows, acta.release_gate takes parked ones SKIP LOCKED).
create or replace function acta.cancel_job(p_namespace text, p_id bigint) returns boolean
language plpgsql
set enable_seqscan = off
as $$
declare
  v_lane    text;
begin
  update acta.jobs j set status = 'cancelled', finished_at = statement_timestamp()
  where j.id = p_id and j.namespace = p_namespace and j.status = 'ready'
  returning j.lane into v_lane;
  if not found then
    return false;
  end if;
  if v_lane is not null then
    perform pg_advisory_xact_lock(acta.gate_lock(p_namespace, 'lane', v_lane));
    if acta.release_gate(p_namespace, 'lane', v_lane) > 0 then
      perform pg_notify('acta_jobs', p_namespace);
    end if;
  end if;
  return true;
end
$$;
