-- acta.wal_message_allowed: whether this session may call pg_logical_emit_message(transactional,
-- prefix, text content) with p_args arguments: 3, or 4 for PostgreSQL 17's fourth, flush (false on
-- older servers, which do not have it; from 17 on there is one function, its flush defaulting to
-- false, so the 3-argument call is that one too). acta.enqueue_jobs_wake_early and
-- acta.enqueue_jobs use them to make a commit durable (see there). Every role may by default; a
-- server that revoked them gets enqueues that commit synchronously and wake workers after the
-- flush, as before the early wake, rather than enqueues that commit their jobs and then fail
-- (which a caller would retry into duplicates).
-- PL/pgSQL, not SQL: acta.enqueue_jobs_wake_early asks it in a simple expression, whose state lasts
-- one transaction, and an SQL function called from there had its catalog query parsed and planned
-- anew at every call (PostgreSQL before 18 keeps no plan of an SQL function across statements);
-- a PL/pgSQL function's statement is planned once per session. Measured (issue 5's latency, an
-- enqueue of one job every 15 ms, p50 of 180 interleaved calls): the NOTIFY reached a listener 1.65
-- ms after the call began with the SQL function and both questions asked, 1.24 with the look-up
-- planned once and the PostgreSQL 17 question skipped before 17, 1.16 with no question at all; the
-- call 2.31, 1.89 and 1.81 ms.
drop function if exists acta.wal_message_allowed();
create or replace function acta.wal_message_allowed(p_args integer) returns boolean
language plpgsql stable
as $$
begin
  if p_args = 4 and current_setting('server_version_num')::integer < 170000 then
    return false; -- the fourth argument came with PostgreSQL 17: no look-up needed before it
  end if;
  return coalesce((
    select bool_or(has_function_privilege(p.oid, 'execute'))
    from pg_proc p
    where p.proname = 'pg_logical_emit_message' and p.pronamespace = 'pg_catalog'::regnamespace
      and p_args between p.pronargs - p.pronargdefaults and p.pronargs and p.proargtypes[2] = 'text'::regtype
  ), false);
end
$$;
