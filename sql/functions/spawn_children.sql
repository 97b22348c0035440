-- acta.spawn_children: a running parent enqueues child jobs, as one recorded step.
--
-- Contract: the step (p_parent, p_step) is recorded with {"ids": [...]} (the children's ids in
-- input order) in the same transaction that enqueues them (acta.enqueue_jobs' arrays and rules:
-- p_checks is its Rule, for the children the worker has no definition of: an undeclared name or a
-- missing key refuses the call with SQLSTATE AC001, nothing written)
-- with parent_id = p_parent and fail_parent = p_fail_parent[i], and raises the parent's
-- children_open by the children created. Returns one row: 'recorded' (this call spawned them),
-- 'exists' (an earlier attempt recorded the step: nothing enqueued; its result), 'stale' (the
-- attempt no longer owns the parent: nothing written), 'cancelled' (the parent's cancel was
-- requested, acta.cancel_job: no child enqueued, since that cancel could not reach it). So a retried parent never spawns twice
-- (docs/workflows.md). An element whose idempotency key names an existing job gets that job's id
-- and is not a child (its parent does not wait for it). The step's result also has "inLane": the
-- input indexes of the children created in the lane of the parent or of an ancestor that has not
-- ended (up the parent_id chain while each is Executing or Waiting), when there are any: they
-- cannot start before that job ends, which waits for the parent or may, so
-- src/workflows/workflow.ts refuses to wait for them (test/db/workflows.test.ts).
-- Fence: as acta.record_step, the parent Executing with execution = p_execution, held by p_worker.
-- Locks: the parent row until commit, then the children inserted. Durability: synchronous commit.
-- Plan: by primary key (the ancestors too, one probe each); the insert as acta.enqueue_jobs'.
drop function if exists acta.spawn_children(uuid, bigint, integer, text, text[], jsonb, integer[], timestamptz[], integer[], text[], text[], text[], text[], boolean[]);
create or replace function acta.spawn_children(
  p_worker           uuid,
  p_parent           bigint,
  p_execution        integer,
  p_step             text,
  p_definitions      text[],
  p_payloads         jsonb,
  p_priorities       integer[],
  p_run_ats          timestamptz[],
  p_max_attempts     integer[],
  p_idempotency_keys text[],
  p_concurrency_keys text[],
  p_rate_keys        text[],
  p_lanes            text[],
  p_fail_parent      boolean[],
  p_checks           boolean[] default null
) returns table (status text, result jsonb)
language plpgsql
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_namespace text;
  v_ids       bigint[];
  v_created   text;
  v_result    jsonb;
  v_cancel    boolean;
  v_lane      text;
  v_up        bigint;
  v_lanes     text[];
  v_in_lane   integer[];
begin
  -- Under the parent's lock, as acta.cancel_job takes it: a cancel is seen here, or sees the children.
  update acta.jobs j set started = true
  where j.id = p_parent and j.execution = p_execution and j.status = 'executing' and j.lease_holder = p_worker
  returning j.namespace, j.cancel_requested_at is not null, j.lane, j.parent_id into v_namespace, v_cancel, v_lane, v_up;
  if not found then
    return query select 'stale'::text, null::jsonb;
    return;
  end if;
  select s.result into v_result from acta.steps s where s.job_id = p_parent and s.name = p_step;
  if found then
    return query select 'exists'::text, v_result;
    return;
  end if;
  if v_cancel then
    return query select 'cancelled'::text, null::jsonb;
    return;
  end if;
  select string_to_array(e.ids, ',')::bigint[], e.created into v_ids, v_created
  from acta.enqueue_jobs(v_namespace, p_definitions, p_payloads, p_priorities, p_run_ats, p_max_attempts,
                         p_idempotency_keys, p_concurrency_keys, p_rate_keys, p_lanes, p_checks) as e;
  update acta.jobs c
  set parent_id = p_parent, fail_parent = coalesce(u.fail, false)
  from unnest(v_ids, string_to_array(v_created, null), p_fail_parent) with ordinality as u(id, created, fail, ord)
  where c.id = u.id and u.created = 't';
  update acta.jobs j
  set children_open = coalesce(j.children_open, 0) + (length(v_created) - length(replace(v_created, 't', '')))
  where j.id = p_parent;
  v_result := jsonb_build_object('ids', to_jsonb(array(select x::text from unnest(v_ids) as x)));
  -- The lanes held by the parent and by its ancestors that have not ended (see Contract).
  v_lanes := array(
    with recursive up (id, parent_id, lane, depth) as (
      select a.id, a.parent_id, a.lane, 1 from acta.jobs a
      where a.id = v_up and a.status in ('executing', 'waiting')
      union all
      select a.id, a.parent_id, a.lane, u.depth + 1 from up u join acta.jobs a on a.id = u.parent_id
      where a.status in ('executing', 'waiting') and u.depth < 1000
    )
    select u.lane from up u where u.lane is not null);
  if v_lane is not null then v_lanes := v_lanes || v_lane; end if;
  if cardinality(v_lanes) > 0 then
    v_in_lane := array(select u.ord - 1 from unnest(string_to_array(v_created, null), p_lanes) with ordinality as u(created, lane, ord)
                       where u.created = 't' and u.lane = any (v_lanes) order by u.ord);
    if cardinality(v_in_lane) > 0 then v_result := v_result || jsonb_build_object('inLane', to_jsonb(v_in_lane)); end if;
  end if;
  insert into acta.steps (job_id, name, execution, result) values (p_parent, p_step, p_execution, v_result);
  return query select 'recorded'::text, v_result;
end
$$;
