-- acta.prune_jobs(namespace, succeeded_ms, cancelled_ms, failed_ms, limit) -> rows deleted
-- Contract: deletes up to p_limit finished rows of the namespace whose finished_at is more than
-- their state's age before now() (ms; a null age keeps that state), oldest first within a state,
-- with every row that refers to them, through acta.delete_jobs (the one place that deletes a job;
-- docs/retention.md). Fewer than p_limit deleted: nothing due is left, apart from rows locked at
-- that instant, which the next pass takes.
-- Rows that must stay (docs/DESIGN.md, "Decisions for recurring work"): a child whose parent has
-- not finished; a job that can still consume a signal has not finished, so is never picked.
-- Fence: none: a finished row has no attempt left to fence; a row finishing in a transaction not
-- yet committed is not finished in this one's snapshot.
-- Locks: FOR UPDATE SKIP LOCKED on the job rows it takes (never waits for a claim, a completion,
-- a cancel or a watch holding one), then what refers to them (acta.delete_jobs): no lock
-- order to share with acta.complete_executions, no deadlock.
-- Durability: the caller's commit; the caller bounds each call with SET LOCAL statement_timeout
-- (src/recurring/retention.ts). Plan: succeeded_jobs_finished_idx (migration 0023), then
-- jobs_finished_idx, one range per state ending at its cutoff and read in its order, stopping at
-- `limit` (migration 0014), then acta.delete_jobs's.
-- Sequential scans, bitmap scans and sorts off: a plan made while the table was small (or
-- estimating few due rows) would otherwise read every due row of a state and sort them, millions
-- at once (docs/decisions/2026-11-30-plans-made-on-a-small-table.md;
-- test/db/retention.test.ts, "a batch reads only").
create or replace function acta.prune_jobs(
  p_namespace    text,
  p_succeeded_ms bigint,
  p_cancelled_ms bigint,
  p_failed_ms    bigint,
  p_limit        integer
) returns integer
language plpgsql
set enable_seqscan = off
set enable_bitmapscan = off
set enable_sort = off
set jit = off
as $$
declare
  v_left  integer := p_limit;
  v_ids   bigint[];
  v_state record;
begin
  -- Successes moved out of acta.jobs (migration 0023) first: none is a child, so none must stay.
  if p_succeeded_ms is not null then
    select coalesce(array_agg(p.id), '{}') into v_ids
    from (
      select s.id
      from acta.succeeded_jobs s
      where hashtextextended(s.namespace || '/' || s.status, 0) = hashtextextended(p_namespace || '/succeeded', 0)
        and s.namespace = p_namespace and s.finished_at < now() - p_succeeded_ms * interval '1 millisecond'
      order by hashtextextended(s.namespace || '/' || s.status, 0), s.finished_at
      limit v_left
      for update of s skip locked
    ) p;
    v_left := v_left - acta.delete_jobs(v_ids);
  end if;
  for v_state in
    select s.status, s.age_ms
    from unnest(array['succeeded', 'cancelled', 'failed'], array[p_succeeded_ms, p_cancelled_ms, p_failed_ms]) as s(status, age_ms)
    where s.age_ms is not null
  loop
    exit when v_left <= 0;
    select coalesce(array_agg(p.id), '{}') into v_ids
    from (
      select j.id
      from acta.jobs j
      where hashtextextended(j.namespace || '/' || j.status, 0) = hashtextextended(p_namespace || '/' || v_state.status, 0)
        and j.namespace = p_namespace and j.status = v_state.status and j.finished_at is not null
        and j.finished_at < now() - v_state.age_ms * interval '1 millisecond'
        -- keep: rows that must stay.
        and (j.parent_id is null
             or not exists (select 1 from acta.jobs p
                            where p.id = j.parent_id and p.status not in ('succeeded', 'failed', 'cancelled')))
      order by hashtextextended(j.namespace || '/' || j.status, 0), j.finished_at
      limit v_left
      for update of j skip locked
    ) p;
    v_left := v_left - acta.delete_jobs(v_ids);
  end loop;
  return p_limit - v_left;
end
$$;
