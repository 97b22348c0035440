-- acta.watch_job: mark one job of a namespace as observed (client.observe, client.result), so
-- that each later change of its status, attempt, progress or cancel request sends NOTIFY acta_job
-- with its id (migration 0009's trigger).
--
-- Contract: true when the namespace has the job (watched now, or already); false when not. Never
-- unset: the mark costs only that watched rows notify.
-- Locks: the row, briefly, when not watched yet (a claim skips it meanwhile; a completion or a
-- heartbeat waits for this statement). Wakeup: a claim that skipped the row answered "nothing due"
-- and sleeps up to its safety poll, so marking a claimable row (Ready, unparked, due) sends
-- pg_notify('acta_jobs', namespace), delivered at this commit, once the lock is gone
-- (test/db/observe.test.ts, "a claim that skipped the row a watch held").
-- Durability: the caller's commit.
create or replace function acta.watch_job(p_namespace text, p_id bigint) returns boolean
language plpgsql
as $$
declare
  v_claimable boolean;
begin
  update acta.jobs j set watched = true
  where j.id = p_id and j.namespace = p_namespace and not j.watched
  returning j.status = 'ready' and j.blocked_by is null and j.run_at <= now() into v_claimable;
  if found then
    if v_claimable then
      perform pg_notify('acta_jobs', p_namespace);
    end if;
    return true;
  end if;
  return exists (select 1 from acta.all_jobs j where j.id = p_id and j.namespace = p_namespace);
end
$$;
