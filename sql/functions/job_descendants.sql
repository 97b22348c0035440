-- acta.job_descendants: a job's unfinished descendants (children, their children, ...), in the
-- order a family's row locks are taken: deepest first, then by id (acta.cancel_job, "Locks").
--
-- Contract: the ids of the rows under p_id through parent_id whose status is Ready, Waiting or
-- Executing, reached only through such rows (a finished child's own children are not followed).
-- Locks: none (a plain read; the caller locks the rows in this order).
-- Plan: jobs_parent_idx per level.
create or replace function acta.job_descendants(p_id bigint) returns bigint[]
language sql stable
set enable_seqscan = off
set jit = off
as $$
  with recursive family (id, depth) as (
    select c.id, 1 from acta.jobs c
    where c.parent_id = p_id and c.status in ('ready', 'waiting', 'executing')
    union all
    select c.id, f.depth + 1 from acta.jobs c join family f on c.parent_id = f.id
    where c.status in ('ready', 'waiting', 'executing')
  )
  select coalesce(array_agg(f.id order by f.depth desc, f.id), '{}') from family f
$$;
