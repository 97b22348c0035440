-- acta.enqueue_jobs_wake_early: acta.enqueue_jobs for a caller outside any transaction (the
-- client's enqueue on a Db), with its workers woken before the WAL flush instead of after it.
--
-- Contract: the same arguments and answer (the INOUT ids, created) as acta.enqueue_jobs. Two
-- transactions in one call (one round trip, DESIGN.md "Storage"): the enqueue commits with
-- synchronous_commit = off, so its rows are visible and its NOTIFY leaves at once; then a
-- transaction that writes one WAL record (a transactional logical message, prefix 'acta')
-- commits under the session's own synchronous_commit, and that commit's flush (and, with
-- synchronous standbys, their confirmation) covers the enqueue's commit record, which precedes it
-- in the WAL. On PostgreSQL 17 and later without synchronous standbys, that second transaction is
-- a non-transactional message written with flush = true instead: the same flush, no transaction id
-- (the message needs none; a standby's confirmation is only waited for at a commit, hence the
-- transactional form whenever synchronous_standby_names is set). So the call returns exactly as
-- durable as acta.enqueue_jobs would; what changes is that a worker may claim and start the job
-- up to one flush earlier (issue 5's latency: NOTIFY
-- at a listener 0.89 against 1.58 ms after the call began, p50 of 300 calls 15 ms apart, p99 2.7
-- against 5.2 ms; the call itself 1.77 against 1.73 ms. The bench's latency, 3 interleaved
-- pairs: p50 at the defaults 3.63 / 3.44 / 3.56 against 4.23 / 4.04 / 4.30 ms).
-- What a server crash inside that window can do: lose a job whose handler had started (the call
-- fails; README, "Durability of each write"). Anything a job's attempt commits durably (a step
-- record, its completion) flushes the WAL through the enqueue first, and an idempotency key
-- found taken by a later enqueue is covered by that enqueue's own flush (in a caller's
-- transaction, by the WAL record acta.enqueue_jobs then writes, so that the caller's commit
-- flushes). Cost, before PostgreSQL 17 or with synchronous standbys: two transaction ids per call
-- instead of one (the second only commits the message), which autovacuum's freezing sees as twice
-- the enqueue calls. A session whose synchronous_commit is off asked for no flush: it gets none.
-- Not inside a transaction block (transaction control: CALL fails with 2D000 there); a caller's
-- transaction uses acta.enqueue_jobs. The message's decoding: a logical-decoding consumer that
-- asks for messages sees one per call, prefix 'acta', content 'enqueue'.
create or replace procedure acta.enqueue_jobs_wake_early(
  p_namespace        text,
  p_definitions      text[],
  p_payloads         jsonb,
  p_priorities       integer[],
  p_run_ats          timestamptz[],
  p_max_attempts     integer[],
  p_idempotency_keys text[],
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
  from acta.enqueue_jobs(p_namespace, p_definitions, p_payloads, p_priorities, p_run_ats, p_max_attempts, p_idempotency_keys) e;
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
