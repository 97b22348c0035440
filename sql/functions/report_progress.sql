-- acta.report_progress: store the progress the running attempts of one worker reported
-- (ctx.progress), in one call for the whole batch (src/progress.ts throttles what is sent).
--
-- Contract: parallel arrays, one element per attempt; p_values is a JSON array of the values, the
-- last one reported per attempt. Each row takes its value as `progress`; a watched row then sends
-- NOTIFY acta_job (migration 0009's trigger). Returns how many rows took theirs.
-- Fence: as acta.complete_executions: only a row that is Executing with the same execution number
-- and held by p_worker; a late report of an attempt that has ended changes nothing.
-- Locks: the rows it updates, until the caller's commit; a row that another transaction holds is
-- skipped (FOR UPDATE SKIP LOCKED): progress is advisory, and the next report carries the latest.
-- Durability: the caller's commit (a report lost in a crash is superseded by the next, or by the
-- job's end).
-- Plan: by primary key from `j.id = any (p_ids)`.
create or replace function acta.report_progress(
  p_worker     uuid,
  p_ids        bigint[],
  p_executions integer[],
  p_values     jsonb
) returns integer
language sql
set enable_seqscan = off
as $$
  with input as (
    select u.id, u.execution, p_values -> (u.ord::integer - 1) as value
    from unnest(p_ids, p_executions) with ordinality as u(id, execution, ord)
  ),
  held as (
    select j.id
    from acta.jobs j
    join input i on i.id = j.id and i.execution = j.execution
    where j.id = any (p_ids) and j.status = 'executing' and j.lease_holder = p_worker
    for update of j skip locked
  ),
  reported as (
    update acta.jobs j set progress = i.value
    from held h, input i
    where j.id = any (p_ids) and j.id = h.id and i.id = h.id
    returning j.id
  )
  select count(*)::integer from reported
$$;
