-- acta.wal_message_allowed: whether this session may call pg_logical_emit_message(transactional,
-- prefix, text content) with p_args arguments: 3, or 4 for PostgreSQL 17's fourth, flush (false on
-- older servers, which do not have it; from 17 on there is one function, its flush defaulting to
-- false, so the 3-argument call is that one too). acta.enqueue_jobs_wake_early and
-- acta.enqueue_jobs use them to make a commit durable (see there). Every role may by default; a
-- server that revoked them gets enqueues that commit synchronously and wake workers after the
-- flush, rather than enqueues that commit their jobs and then fail (which a caller would retry
-- into duplicates; test/faults/enqueueFlush.test.ts).
-- PL/pgSQL, not SQL, so its query is planned once per session, not at every call from a simple
-- expression (test/db/catalog.test.ts; docs/decisions/2026-12-03-wal-message-allowed-in-plpgsql.md).
-- Locks: none. The zero-argument form of earlier revisions is dropped.
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
