-- acta.watch_job: mark one job of a namespace as observed (client.observe, client.result), so
-- that each later change of its status, attempt, progress or cancel request sends NOTIFY acta_job
-- with its id (migration 0009's trigger).
--
-- Contract: true when the namespace has the job (watched now, or already); false when not. Never
-- unset: the mark costs only that watched rows notify.
-- Locks: the row, briefly, when not watched yet (a claim skips it meanwhile; a completion or a
-- heartbeat waits for this statement). Durability: the caller's commit.
create or replace function acta.watch_job(p_namespace text, p_id bigint) returns boolean
language sql
as $$
  with marked as (
    update acta.jobs j set watched = true
    where j.id = p_id and j.namespace = p_namespace and not j.watched
    returning j.id
  )
  select exists (select 1 from marked)
      or exists (select 1 from acta.jobs j where j.id = p_id and j.namespace = p_namespace)
$$;
