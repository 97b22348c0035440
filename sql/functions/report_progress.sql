-- acta.report_progress: store the progress the running attempts of one worker reported
-- (ctx.progress), in one call for the whole batch (src/progress.ts throttles what is sent).
--
-- Contract: parallel arrays, one element per attempt; p_values is a JSON array of the values, the
-- last one reported per attempt. Each row takes its value as `progress`; a watched row then sends
-- NOTIFY acta_job (migration 0009's trigger). Returns how many rows took theirs.
-- Fence: as acta.complete_executions: only a row that is Executing with the same execution number
-- and held by p_worker; a late report of an attempt that has ended changes nothing.
-- Locks: the rows nobody else holds (FOR UPDATE SKIP LOCKED), then a wait of at most 100 ms for
-- the rows locked at that moment (an observer's acta.watch_job, a heartbeat), as acta.heartbeat
-- does: an attempt's last value, sent just before its completion, is not dropped for a lock held
-- for an instant (test/db/observe.test.ts). A row still locked after that is left: the next report
-- carries the latest value.
-- Durability: the caller's commit. Plan: by primary key from `j.id = any (p_ids)`.
drop function if exists acta.report_progress(uuid, bigint[], integer[], jsonb);
create or replace function acta.report_progress(
  p_worker     uuid,
  p_ids        bigint[],
  p_executions integer[],
  p_values     jsonb
) returns integer
language plpgsql
set enable_seqscan = off
set jit = off
as $$
declare
  v_held    bigint[];
  v_done    bigint[];
  v_late    bigint[];
  v_lock_timeout text;
begin
  with input as (
    select u.id, u.execution, p_values -> (u.ord::integer - 1) as value
    from unnest(p_ids, p_executions) with ordinality as u(id, execution, ord)
  ),
  held as (
    select j.id
    from acta.jobs j
    join input i on i.id = j.id and i.execution = j.execution
    where j.id = any (p_ids) and j.status = 'executing' and j.lease_holder = p_worker
  ),
  lockable as (
    select j.id from acta.jobs j
    where j.id = any (p_ids) and j.id in (select id from held)
    for update skip locked
  ),
  reported as (
    update acta.jobs j set progress = i.value
    from lockable l, input i
    where j.id = any (p_ids) and j.id = l.id and i.id = l.id
    returning j.id
  )
  select (select coalesce(array_agg(id), '{}') from held), (select coalesce(array_agg(id), '{}') from reported)
    into v_held, v_done;

  v_late := array(select unnest(v_held) except select unnest(v_done));
  if cardinality(v_late) > 0 then
    v_lock_timeout := current_setting('lock_timeout');
    perform set_config('lock_timeout', '100ms', true);
    begin
      with input as (
        select u.id, u.execution, p_values -> (u.ord::integer - 1) as value
        from unnest(p_ids, p_executions) with ordinality as u(id, execution, ord)
      ),
      reported as (
        update acta.jobs j set progress = i.value
        from input i
        where j.id = any (v_late) and j.id = i.id and j.execution = i.execution
          and j.status = 'executing' and j.lease_holder = p_worker
        returning j.id
      )
      select v_done || coalesce(array_agg(id), '{}') into v_done from reported;
    exception when lock_not_available then
      null; -- still locked after 100 ms: the next report carries the latest value
    end;
    perform set_config('lock_timeout', v_lock_timeout, true);
  end if;
  return cardinality(v_done);
end
$$;
