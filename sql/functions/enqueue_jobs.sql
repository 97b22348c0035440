-- acta.enqueue_jobs: insert a batch of jobs in one call and wake idle workers once.
--
-- Contract: one element per job. p_payloads is a JSON array of the payloads; the other arrays run
-- in parallel with it, a null ARRAY standing for all-null elements; a null priority / run_at takes
-- 0 / now(), a null max_attempts stays null (the definition's applies: migration 0004); a job's
-- concurrency key, rate key and lane (docs/DESIGN.md, "Policies"; null: none) are stored as given
-- (a new row is never parked). Returns one row: `ids`, the job ids in input order joined by commas,
-- and `created`, a letter per element, 't' created by this call, 'f' not. An element whose
-- idempotency key already names a job in the namespace (an earlier row, an earlier element, a row
-- a concurrent transaction committed while this insert waited for it; under REPEATABLE READ a
-- serialization failure) creates nothing and returns that job's id (test/db/enqueue.test.ts).
-- Rule (src/policies/enqueueRule.ts; docs/reference.md, "Which definitions a client may enqueue"):
-- an element whose p_checks entry is true (its client has no definition of it) must name a
-- definition some worker declared in the namespace (acta.definitions), and carry a key for each of
-- its declared concurrency, rate and lane policies, and no concurrency or rate key for a policy it
-- does not declare (it would run never, unlimited, or in another definition's limit). The first
-- element refused raises SQLSTATE AC001, detail {"item", "name", "missing"[, "unused"]}, and
-- nothing is written. p_checks null: nothing checked.
-- Durability: the caller's commit; a key found taken adds a WAL record so that commit flushes
-- through the job it names (docs/decisions/2026-12-01-a-taken-key-makes-the-enqueue-flush.md).
-- Locks: the inserted rows; a conflicting key waits for its inserter; keyed rows in key order.
-- Wakeup: one pg_notify('acta_jobs', namespace) per call when a job is due within a second,
-- delivered at commit (in a caller's transaction, only then).
-- Plan: one acta.definitions probe per checked element; the insert, then a jobs_idempotency_key_idx
-- probe per taken key; no join to acta.jobs, no sequential scans, no JIT (test/db/plans.test.ts).
drop function if exists acta.enqueue_jobs(text, text[], jsonb[], integer[], timestamptz[], integer[], text[]);
drop function if exists acta.enqueue_jobs(text, text[], jsonb, integer[], timestamptz[], integer[], text[]);
drop function if exists acta.enqueue_jobs(text, text[], jsonb, integer[], timestamptz[], integer[], text[], text[], text[], text[]);
create or replace function acta.enqueue_jobs(
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
  p_checks           boolean[] default null
) returns table (ids text, created text)
language plpgsql
-- See Plan.
set jit = off
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_ids     bigint[];
  v_created boolean[];
  v_id_text text;
  v_created_text text;
  v_refused jsonb;
begin
  if p_checks is not null and true = any (p_checks) then
    -- k: the rule's key tests, once per element, read by the filter and the detail (so by the
    -- raise): the keys a declared policy lacks, and those given for a policy not declared (an
    -- undeclared name, no d, has neither).
    select jsonb_build_object('item', u.ord - 1, 'name', u.definition, 'missing', to_jsonb(k.missing))
           || case when cardinality(k.unused) > 0 then jsonb_build_object('unused', to_jsonb(k.unused)) else '{}'::jsonb end
      into v_refused
    from rows from (unnest(p_definitions), unnest(p_checks), unnest(p_concurrency_keys), unnest(p_rate_keys), unnest(p_lanes))
      with ordinality as u(definition, checked, ckey, rkey, lane, ord)
    left join acta.definitions d on d.namespace = p_namespace and d.name = u.definition
    cross join lateral (
      select case when jsonb_typeof(d.policy -> 'concurrency') = 'object' and u.ckey is null then '{concurrency}'::text[] else '{}' end
             || case when jsonb_typeof(d.policy -> 'rate') = 'object' and u.rkey is null then '{rate}'::text[] else '{}' end
             || case when coalesce((d.policy ->> 'lane')::boolean, false) and u.lane is null then '{lane}'::text[] else '{}' end as missing,
             case when d.name is not null and jsonb_typeof(d.policy -> 'concurrency') is distinct from 'object' and u.ckey is not null then '{concurrency}'::text[] else '{}' end
             || case when d.name is not null and jsonb_typeof(d.policy -> 'rate') is distinct from 'object' and u.rkey is not null then '{rate}'::text[] else '{}' end as unused
    ) k
    where u.checked and (d.name is null or cardinality(k.missing) > 0 or cardinality(k.unused) > 0)
    order by u.ord
    limit 1;
    if v_refused is not null then
      raise exception 'acta.enqueue_jobs: definition % refused in namespace % (see detail)', v_refused ->> 'name', p_namespace
        using errcode = 'AC001', detail = v_refused::text;
    end if;
  end if;
  if p_idempotency_keys is null or not exists (select 1 from unnest(p_idempotency_keys) k where k is not null) then
    -- No idempotency keys: nothing can conflict. One insert; the ids were drawn in input order.
    with input as (
      select nextval('acta.jobs_id_seq'::regclass) as new_id, u.*
      -- ROWS FROM zips the element lists, padding a null array with nulls.
      from rows from (unnest(p_definitions), jsonb_array_elements(p_payloads), unnest(p_priorities),
                      unnest(p_run_ats), unnest(p_max_attempts), unnest(p_concurrency_keys),
                      unnest(p_rate_keys), unnest(p_lanes))
        with ordinality as u(definition, payload, priority, run_at, max_attempts, concurrency_key, rate_key, lane, ord)
    ),
    inserted as (
      insert into acta.jobs (id, namespace, definition, payload, priority, run_at, max_attempts, concurrency_key, rate_key, lane)
      overriding system value
      select i.new_id, p_namespace, i.definition, i.payload, coalesce(i.priority, 0),
             coalesce(i.run_at, now()), i.max_attempts, i.concurrency_key, i.rate_key, i.lane
      from input i
    )
    select string_agg(i.new_id::text, ',' order by i.ord), repeat('t', count(*)::integer)
      into v_id_text, v_created_text
    from input i;
  else
  with input as (
    select u.*, nextval('acta.jobs_id_seq'::regclass) as new_id
    from rows from (unnest(p_definitions), jsonb_array_elements(p_payloads), unnest(p_priorities),
                    unnest(p_run_ats), unnest(p_max_attempts), unnest(p_idempotency_keys),
                    unnest(p_concurrency_keys), unnest(p_rate_keys), unnest(p_lanes))
      with ordinality as u(definition, payload, priority, run_at, max_attempts, idempotency_key, concurrency_key, rate_key, lane, ord)
  ),
  inserted as (
    insert into acta.jobs (id, namespace, definition, payload, priority, run_at, max_attempts, idempotency_key, concurrency_key, rate_key, lane)
    overriding system value
    select i.new_id, p_namespace, i.definition, i.payload, coalesce(i.priority, 0),
           coalesce(i.run_at, now()), i.max_attempts, i.idempotency_key, i.concurrency_key, i.rate_key, i.lane
    from input i
    -- In key order, not input order: two batches sharing keys in different orders then take the
    -- keys' index entries in the same order, one waiting for the other, instead of deadlocking
    -- (docs/decisions/2026-11-30-keyed-inserts-in-key-order.md). Ids still follow the input
    -- order (new_id above).
    order by i.idempotency_key, i.ord
    on conflict (namespace, idempotency_key) where idempotency_key is not null do nothing
    returning acta.jobs.id, acta.jobs.idempotency_key
  )
  -- A key taken before this call: one probe of jobs_idempotency_key_idx per such element (a
  -- subquery, run only when coalesce gets to it), never a join to acta.jobs (see Plan).
  select array_agg(coalesce(ins.id, dup.id,
                            (select e.id from acta.jobs e
                             where e.namespace = p_namespace and e.idempotency_key = i.idempotency_key))
                   order by i.ord),
         array_agg(ins.id is not null order by i.ord)
    into v_ids, v_created
  from input i
  left join inserted ins on ins.id = i.new_id
  left join inserted dup on ins.id is null and dup.idempotency_key = i.idempotency_key;

  -- A new statement takes a new snapshot: a conflicting row committed while the insert waited
  -- for it is visible now. (An id still null here, a job deleted during this call, is sent as
  -- an empty entry.)
  select string_agg(coalesce(coalesce(r.id, (select j.id from acta.jobs j
                                             where j.namespace = p_namespace and j.idempotency_key = k.key))::text, ''),
                    ',' order by r.ord),
         string_agg(case when r.created then 't' else 'f' end, '' order by r.ord)
    into v_id_text, v_created_text
  from unnest(v_ids, v_created) with ordinality as r(id, created, ord)
  join unnest(p_idempotency_keys) with ordinality as k(key, ord) on k.ord = r.ord;

  -- A key found taken names a job another enqueue may have committed before its WAL flush
  -- (acta.enqueue_jobs_wake_early). This transaction then has one WAL record of its own, so that
  -- its synchronous commit flushes (and waits for synchronous standbys) through that job before
  -- the caller hears of it (test/faults/enqueueFlush.test.ts). A transaction id alone is not
  -- enough: a commit that wrote no other WAL does not wait for its flush. A role that may not
  -- write the message locks one such job FOR KEY SHARE instead, which is a WAL record too; that
  -- lock makes a claim skip the job until this commit, whose NOTIFY below wakes the claimers
  -- again. It needs the UPDATE privilege; a role with neither writes nothing.
  if position('f' in v_created_text) > 0 then
    if acta.wal_message_allowed(3) then
      perform pg_logical_emit_message(true, 'acta', 'idempotency key taken');
    elsif has_any_column_privilege('acta.jobs', 'update') then
      perform 1 from acta.jobs j
      where j.id = (select r.id from unnest(v_ids, v_created) as r(id, created) where not r.created and r.id is not null limit 1)
      for key share;
    end if;
  end if;
  end if;

  -- Wake idle workers for a job due now or within a second: an idle claimer sleeps up to its
  -- safety poll (1 s by default), and once woken it sleeps exactly until the next due row. (Only
  -- jobs due now woke anyone before: a job due in 300 ms started up to ~800 ms late.) Jobs due
  -- later are found by that sleep; waking every worker for them would only cost claims.
  if p_run_ats is null or exists (select 1 from unnest(p_run_ats) r where r is null or r <= now() + interval '1 second') then
    perform pg_notify('acta_jobs', p_namespace);
  end if;
  return query select v_id_text, v_created_text;
end
$$;
