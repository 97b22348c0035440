-- 0008_policies: which job runs next, fleet-wide (docs/DESIGN.md, "Policies"): concurrency keys,
-- rate limits, lanes and fair order, admitted by the claim itself (acta.claim_jobs), and each
-- definition's policy stored per namespace with a version the heartbeat reports.
--
-- A Ready row that a claim refused waits PARKED: `blocked_by` names what it waits for ('lane',
-- 'concurrency', 'rate') and keeps it out of the claim's indexes, so a refused backlog costs later
-- claims nothing; its priority, due time and id are untouched, so it keeps its place in the order.
-- A parked row is released, in order, when its gate has room again: a lane's head or a key's attempt
-- ends (the same call that ends it), a recovery pass returns one, or the gate's recheck comes
-- (acta.gates.recheck_at: the concurrency bounce, the next free rate token).
-- Fair definitions order their Ready rows by `fair_tag`, a turn per concurrency key given when the
-- row is due (start-time fair queuing: acta.claim_jobs, "Fair order").

alter table acta.jobs
  add column rate_key   text,
  add column blocked_by text check (blocked_by in ('lane', 'concurrency', 'rate')),
  add column fair_tag   bigint;

-- The claim's indexes hold only rows a claim may take now or when due: not parked, not in a fair
-- definition's turn order (those are in jobs_fair_idx).
drop index acta.jobs_due_idx;
create index jobs_due_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), run_at, id)
  where status = 'ready' and blocked_by is null and fair_tag is null;
drop index acta.jobs_claim_idx;
create index jobs_claim_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), priority desc, run_at, id)
  where status = 'ready' and blocked_by is null and fair_tag is null;
-- A fair definition's due rows in turn order, and each key's last turn.
create index jobs_fair_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), priority desc, fair_tag, id)
  where status = 'ready' and blocked_by is null and fair_tag is not null;
create index jobs_fair_key_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), coalesce(concurrency_key, ''), priority, fair_tag)
  where status = 'ready' and fair_tag is not null;
-- The attempts that hold a key's slots; a lane's head while it runs or waits; a lane's Ready rows
-- in lane order (its head first).
create index jobs_key_held_idx on acta.jobs (namespace, concurrency_key)
  where status = 'executing' and concurrency_key is not null;
create index jobs_lane_held_idx on acta.jobs (namespace, lane)
  where status in ('executing', 'waiting') and lane is not null;
create index jobs_lane_ready_idx on acta.jobs (namespace, lane, id)
  where status = 'ready' and lane is not null;
-- A key's and a meter's rows not parked, by due time: parked all at once when a claim finds the
-- head of its queue blocked by them (acta.claim_jobs).
create index jobs_key_ready_idx on acta.jobs (namespace, concurrency_key, run_at)
  where status = 'ready' and blocked_by is null and concurrency_key is not null;
create index jobs_rate_ready_idx on acta.jobs (namespace, rate_key, run_at)
  where status = 'ready' and blocked_by is null and rate_key is not null;
-- Rows parked on a concurrency key or a rate meter, per gate in the order they are released.
create index jobs_parked_idx on acta.jobs (namespace, blocked_by, (case blocked_by when 'rate' then rate_key else concurrency_key end), priority desc, run_at, id)
  where status = 'ready' and blocked_by in ('concurrency', 'rate');

-- One row per gate that has parked rows waiting or a rate meter running. Changed only under the
-- gate's advisory lock (acta.gate_lock), which every claim, completion and recovery that touches
-- the gate takes first.
create table acta.gates (
  namespace   text not null,
  kind        text not null check (kind in ('lane', 'concurrency', 'rate')),
  key         text not null,
  -- Parked rows are reconsidered then (null: none parked, or they wait only for a hand-on).
  recheck_at  timestamptz,
  -- Rate meters: the start times of the last `limit` admitted attempts, ascending (a sliding log).
  stamps      timestamptz[] not null default '{}',
  -- Rate meters held shut by a handler that was rate limited (ctx.rateLimited).
  shut_until  timestamptz,
  primary key (namespace, kind, key)
);
create index gates_recheck_idx on acta.gates (namespace, recheck_at) where recheck_at is not null;

-- Each definition's policy as the fleet applies it (acta.refresh_definitions): the newest live
-- worker's declaration, except that while live builds disagree the smallest concurrency limit
-- and the slowest rate any of them declared apply. `policy` is that declaration as declared.
alter table acta.definitions
  add column timeout_ms        integer,
  add column concurrency_limit integer check (concurrency_limit >= 1),
  add column rate_limit        integer check (rate_limit >= 1),
  add column rate_per_ms       integer check (rate_per_ms >= 1),
  add column fair              boolean not null default false,
  add column build             text,
  add column policy            jsonb;

-- Bumped whenever a definition's policy in the namespace changes; reported by every heartbeat.
alter table acta.namespaces add column policy_version bigint not null default 0;

-- What each worker declared: its build, and one policy object per definition.
alter table acta.workers
  add column build    text,
  add column policies jsonb;
