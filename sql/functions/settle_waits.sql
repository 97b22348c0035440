-- acta.settle_waits: the rows a completion just parked whose wait is already answered run again.
--
-- Contract: for each row of p_ids that is Waiting: a signal wait takes the oldest unconsumed signal
-- of one of its names from the mailbox (consumed by the wait's step) and wakes with
-- {name, payload}; a children wait wakes with {} when none of its children is open or a
-- 'fail-parent' child failed (acta.wake_job). Called by acta.complete_executions after the
-- statement that parked them, so it reads with a new snapshot while holding their row locks: a
-- signal or a child that committed before the park is seen here, one that commits after it waits
-- for the row's lock and then finds the row Waiting (acta.send_signal, acta.tell_parents).
-- Locks: the rows (held already), the mailbox rows consumed. Plan: by primary key, then
-- signals_mailbox_idx.
create or replace function acta.settle_waits(p_ids bigint[]) returns void
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_job    record;
  v_signal record;
begin
  for v_job in
    select j.id, j.wait_names, j.wait_step, j.children_open, j.children_failed
    from acta.jobs j where j.id = any (p_ids) and j.status = 'waiting'
    order by j.id
  loop
    if v_job.wait_names is not null then
      select s.id, s.name, s.payload into v_signal
      from acta.signals s
      where s.job_id = v_job.id and s.name = any (v_job.wait_names) and s.consumed_at is null
      order by s.id limit 1
      for update;
      if found then
        update acta.signals s set consumed_at = now(), consumed_step = v_job.wait_step where s.id = v_signal.id;
        perform acta.wake_job(v_job.id, jsonb_build_object('name', v_signal.name, 'payload', v_signal.payload));
      end if;
    elsif coalesce(v_job.children_open, 0) = 0 or coalesce(v_job.children_failed, false) then
      perform acta.wake_job(v_job.id, '{}'::jsonb);
    end if;
  end loop;
end
$$;
