-- acta.publish_events(namespace, topics, keys, messages) -> the events' ids, in input order
-- Contract: one acta.outbox row per element (docs/outbox.md); p_keys runs in parallel with
-- p_topics (a null array: no keys), p_messages is a JSON array of the messages. The rows exist
-- at the caller's commit and never after its rollback: in a caller's transaction that is its own
-- commit, otherwise the statement's. Topics and keys are checked by the client (src/client/publish.ts).
-- Fence: none: an event belongs to no attempt.
-- Locks: only the inserted rows; no lock shared with the claim, the completion or the fan-out
-- (whose namespace lock a publisher never takes): publishing never waits for a fan-out.
-- Durability: the caller's commit.
-- Wakeup: one pg_notify('acta_jobs', 'outbox:' || namespace) per call, delivered at commit: a
-- worker running sys.outbox (createWorker({ outbox: true })) fans out at once; sys.outbox's
-- recurring slot is the safety net for a lost notification.
-- Plan: one insert; ids drawn in input order.
create or replace function acta.publish_events(
  p_namespace text,
  p_topics    text[],
  p_keys      text[],
  p_messages  jsonb
) returns bigint[]
language plpgsql as $$
declare
  v_ids bigint[];
begin
  with input as (
    select nextval(pg_get_serial_sequence('acta.outbox', 'id')::regclass) as new_id, u.*
    from rows from (unnest(p_topics), unnest(p_keys), jsonb_array_elements(p_messages))
      with ordinality as u(topic, key, message, ord)
  ),
  inserted as (
    insert into acta.outbox (id, namespace, topic, key, message)
    overriding system value
    select i.new_id, p_namespace, i.topic, i.key, i.message from input i
  )
  select array_agg(i.new_id order by i.ord) into v_ids from input i;
  perform pg_notify('acta_jobs', 'outbox:' || p_namespace);
  return v_ids;
end
$$;
