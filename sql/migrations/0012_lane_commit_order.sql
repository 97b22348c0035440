-- 0012_lane_commit_order: a lane runs its jobs in commit order (docs/policies.md, "Lanes").
--
-- A lane's order was its rows' ids, drawn at enqueue. A row enqueued in a transaction that commits
-- later is invisible meanwhile, so the claim took the rows behind it first and then ran it out of
-- any order (ids A < B < C, A committed last: B, A, C; test/db/laneOrder.test.ts). Now each lane
-- row takes its position, lane_seq, at its commit: a deferred constraint trigger draws it from the
-- jobs' id sequence (so positions and ids of older rows compare) under a lock of its lane held to
-- the end of the commit, so that positions in a lane follow commit order. The claim's and the
-- hand-on's head is the lane's Ready row with the smallest lane_seq.
-- Cost: only for rows with a lane: one update at commit and the lane's lock for the commit's
-- instant (enqueues into one lane commit one at a time). Rows without a lane: the trigger's WHEN.
alter table acta.jobs add column lane_seq bigint;

update acta.jobs set lane_seq = id where lane is not null;

drop index acta.jobs_lane_ready_idx;
create index jobs_lane_ready_idx on acta.jobs (namespace, lane, lane_seq)
  where status = 'ready' and lane is not null;

-- The position, at commit (see above). The lock's key is not a gate's (acta.gate_lock): a claim
-- never waits for a commit in progress. A row deleted before its commit has nothing to number.
create function acta.take_lane_position() returns trigger
language plpgsql
as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('lane position/' || new.namespace || '/' || new.lane, 0));
  update acta.jobs set lane_seq = nextval('acta.jobs_id_seq'::regclass) where id = new.id;
  return null;
end
$$;

create constraint trigger jobs_lane_position
  after insert on acta.jobs
  deferrable initially deferred
  for each row
  when (new.lane is not null)
  execute function acta.take_lane_position();
