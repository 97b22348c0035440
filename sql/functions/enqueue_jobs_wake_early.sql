-- acta.enqueue_jobs_wake_early: acta.enqueue_jobs for a caller outside any transaction (the
-- client's enqueue on a Db), with its workers woken before the WAL flush instead of after it.
--
-- Contract: the same arguments and answer (the INOUT ids, created) as acta.enqueue_jobs; not
-- inside a transaction block (CALL fails with 2D000 there: a caller's transaction uses
-- acta.enqueue_jobs). Two transactions in one call (one round trip, docs/DESIGN.md "Storage"):
-- the enqueue commits with synchronous_commit = off, so its rows are visible and its NOTIFY
-- leaves at once; then one WAL record (a logical message, prefix 'acta', content 'enqueue')
-- is flushed under the session's own synchronous_commit: non-transactional with flush = true on
-- PostgreSQL 17+ without synchronous standbys, else committed in a transaction of its own, so
-- standbys confirm it. That flush covers the enqueue's commit record, which precedes it in the WAL.
-- Durability: the call returns exactly as durable as acta.enqueue_jobs would (a session whose
-- synchronous_commit is off asked for no flush and gets none); a worker may start the job up to
-- one flush earlier, and a server crash inside that window can lose a job whose handler started
-- (the call then fails). A role that may not write the message gets acta.enqueue_jobs' one
-- synchronous commit (acta.wal_message_allowed). Why, measured, and the cost in transaction ids:
-- docs/decisions/2026-12-01-enqueue-wakes-before-the-flush.md (test/faults/enqueueFlush.test.ts).
-- Locks: acta.enqueue_jobs'.
drop procedure if exists acta.enqueue_jobs_wake_early(text, text[], jsonb, integer[], timestamptz[], integer[], text[], text, text);
drop procedure if exists acta.enqueue_jobs_wake_early(text, text[], jsonb, integer[], timestamptz[], integer[], text[], text[], text[], text[], text, text);
create or replace procedure acta.enqueue_jobs_wake_early(
  p_namespace        text,
  p_definitions      text[],
  p_payloads         jsonb,
  p_priorities       integer[],
  p_run_ats          timestamptz[],
  p_max_attempts     integer[],
  p_idempotency_keys text[],
  p_concurrency_keys text[],
  p_rate_keys        text[],
  p_lanes            text[],
  p_checks           boolean[],
  inout ids          text default null,
  inout created      text default null
)
language plpgsql
as $$
declare
  -- How the enqueue's commit is made durable after it (see Contract): 'flush', a message flushed
  -- without a transaction (PostgreSQL 17+, no synchronous standbys); 'commit', a transactional
  -- message committed; null, neither allowed: as acta.enqueue_jobs, one synchronous commit.
  v_after text := case
    when current_setting('synchronous_standby_names') = '' and acta.wal_message_allowed(4) then 'flush' -- false before 17
    when acta.wal_message_allowed(3) then 'commit'
  end;
begin
  if v_after is not null then
    perform set_config('synchronous_commit', 'off', true); -- the enqueue's transaction only
  end if;
  select e.ids, e.created into ids, created
  from acta.enqueue_jobs(p_namespace, p_definitions, p_payloads, p_priorities, p_run_ats, p_max_attempts, p_idempotency_keys,
                         p_concurrency_keys, p_rate_keys, p_lanes, p_checks) e;
  commit;
  if v_after = 'flush' then
    if current_setting('synchronous_commit') <> 'off' then -- the session's own setting again
      perform pg_logical_emit_message(false, 'acta', 'enqueue', true);
    end if;
  elsif v_after = 'commit' then
    perform pg_logical_emit_message(true, 'acta', 'enqueue');
  end if;
end
$$;
