-- acta.fan_out_events(namespace, limit) -> (events, jobs): one sys.outbox batch
-- Contract (docs/outbox.md): takes the namespace's oldest p_limit events and, for each, enqueues
-- one job per definition whose applied policy subscribes to its topic (acta.definitions.policy
-- -> 'subscribe', the newest live worker's declaration), then deletes the events, all in one
-- transaction. An event no definition subscribes to is deleted with no job. A job's payload is
-- { id, topic, key, message, publishedAt }; its idempotency key 'acta:outbox:<event id, 19
-- digits>:<definition>' is the unique (event, definition) pair: a second job of one pair is never
-- created (acta.enqueue_jobs' key rule). A keyed event's job takes the lane
-- 'acta:outbox:<length of definition>:<definition>:<key>', so one subscriber's jobs of one key run
-- one at a time in event id order; a subscriber's concurrency or rate policy keys its jobs by its
-- name (key functions cannot run here: checkDefinition refuses them with subscribe).
-- Order: under the namespace's fan-out lock, batches commit one after another in id order, and
-- within a batch jobs are inserted in (event id, definition) order, which is the order of their
-- keys (19 digits), so lane positions (migration 0012) follow event ids.
-- Paused: while the namespace's sys.outbox schedule is paused, nothing is taken, by its fires or by
-- a worker's pass at a publish wakeup alike: its events wait in acta.outbox for the resume
-- (docs/outbox.md, "Asking for it"; as a paused sys.retention holds retention zero).
-- Fence: none. Locks: pg_advisory_xact_lock('outbox/<namespace>'): a second fan-out of the
-- namespace waits for the first's commit and then no longer sees its events (exactly once); the
-- events it takes (FOR UPDATE); acta.enqueue_jobs' locks. Never a lock the claim or the
-- completion takes, apart from lane positions at commit.
-- Durability: the caller's commit; the caller bounds it with SET LOCAL statement_timeout
-- (src/db/outbox.ts). Plan: the schedule by its primary key; outbox_namespace_idx in id order to
-- `limit`; acta.enqueue_jobs'.
create or replace function acta.fan_out_events(p_namespace text, p_limit integer)
returns table (events integer, jobs integer)
language plpgsql as $$
declare
  v_ids   bigint[];
  v       record;
begin
  if exists (select 1 from acta.schedules s where s.namespace = p_namespace and s.name = 'sys.outbox' and s.paused) then
    return query select 0, 0;
    return;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('outbox/' || p_namespace, 0));
  select array_agg(o.id order by o.id) into v_ids
  from (select o.id from acta.outbox o where o.namespace = p_namespace order by o.id limit p_limit for update) o;
  if v_ids is null then
    return query select 0, 0;
    return;
  end if;
  select array_agg(p.definition order by p.ord) as definitions,
         coalesce(jsonb_agg(p.payload order by p.ord), '[]'::jsonb) as payloads,
         array_agg(p.idempotency_key order by p.ord) as keys,
         array_agg(p.ckey order by p.ord) as ckeys,
         array_agg(p.rkey order by p.ord) as rkeys,
         array_agg(p.lane order by p.ord) as lanes,
         count(*)::integer as n
    into v
  from (
    select d.name as definition,
           jsonb_build_object('id', o.id::text, 'topic', o.topic, 'key', o.key, 'message', o.message,
                              'publishedAt', to_char(o.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) as payload,
           'acta:outbox:' || lpad(o.id::text, 19, '0') || ':' || d.name as idempotency_key,
           case when jsonb_typeof(d.policy -> 'concurrency') = 'object' then d.name end as ckey,
           case when jsonb_typeof(d.policy -> 'rate') = 'object' then d.name end as rkey,
           case when o.key is not null then 'acta:outbox:' || octet_length(d.name) || ':' || d.name || ':' || o.key end as lane,
           row_number() over (order by o.id, d.name collate "C") as ord
    from acta.outbox o
    join acta.definitions d
      on d.namespace = p_namespace and jsonb_typeof(d.policy -> 'subscribe') = 'array' and d.policy -> 'subscribe' ? o.topic
    where o.id = any (v_ids)
  ) p;
  if v.n > 0 then
    perform acta.enqueue_jobs(p_namespace, v.definitions, v.payloads, null, null, null, v.keys, v.ckeys, v.rkeys, v.lanes, null);
  end if;
  delete from acta.outbox o where o.id = any (v_ids);
  return query select cardinality(v_ids), v.n;
end
$$;
