-- 0001_core: the ledger (jobs), the attempt ledger (executions), the step ledger (steps),
-- the membership list (workers) and the per-namespace clocks (namespaces).
--
-- Contract: shared/DESIGN.md, "The ledger" and "The lease clock". All times are timestamptz and
-- judged by the database clock (now()); a worker only ever sends durations.
--
-- Room for what comes next, so later capabilities add columns or tables rather than rewrite:
--   concurrency keys -> jobs.concurrency_key (+ a slots table)
--   lanes (FIFO)     -> jobs.lane (+ a lanes table holding the head of each lane)
--   signals          -> status 'waiting' + jobs.waiting_for
--   children         -> jobs.parent_id
--   schedules        -> a schedules table whose fires are ordinary jobs (jobs.schedule_id)
--   steps            -> the steps table below

create schema if not exists acta;

create table acta.namespaces (
  name             text primary key,
  created_at       timestamptz not null default now(),
  -- The recovery pass of this namespace is due at this time; the heartbeat that finds it due
  -- moves it one lease on in the same statement and runs the pass (DESIGN.md, lease clock).
  recovery_due_at  timestamptz not null default now()
);

create table acta.jobs (
  id                bigint generated always as identity primary key,
  namespace         text not null default 'default',
  definition        text not null,
  payload           jsonb not null,
  -- Ready -> Executing -> Succeeded | Failed | Ready (retry); Waiting; Cancelled (DESIGN.md).
  status            text not null default 'ready'
                    check (status in ('ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled')),
  priority          integer not null default 0,
  run_at            timestamptz not null default now(),
  -- The fence: every claim increments it; every later write of that attempt carries it.
  execution         integer not null default 0,
  -- Attempts charged against max_attempts (a handed-back or unstarted-and-recovered claim is not).
  attempts          integer not null default 0,
  max_attempts      integer not null default 25 check (max_attempts >= 1),
  -- Recovery returns of an attempt that never started are uncharged, at most 3 per job
  -- (see acta.recover_jobs): a poison job cannot loop forever uncharged.
  uncharged_returns integer not null default 0,
  lease_holder      uuid,
  lease_expires_at  timestamptz,
  claimed_at        timestamptz,
  started           boolean not null default false,
  idempotency_key   text,
  concurrency_key   text,
  lane              text,
  parent_id         bigint,
  result            jsonb,
  error             jsonb,
  created_at        timestamptz not null default now(),
  finished_at       timestamptz
);

-- The claim's order, for due rows only: the plan is right with or without statistics.
create index jobs_claim_idx on acta.jobs (namespace, priority desc, run_at, id) where status = 'ready';
-- The earliest future due time, for the idle claimer's sleep.
create index jobs_due_idx on acta.jobs (namespace, run_at) where status = 'ready';
-- Recovery: held rows by lease expiry (only in-flight rows are in this index).
create index jobs_lease_idx on acta.jobs (namespace, lease_expires_at) where status = 'executing';
create unique index jobs_idempotency_key_idx on acta.jobs (namespace, idempotency_key)
  where idempotency_key is not null;

-- One row per attempt, written once when the attempt ends (completed, handed back, or lost to
-- recovery), so the attempt ledger costs one insert per attempt and no update.
create table acta.executions (
  job_id       bigint not null,
  execution    integer not null,
  worker_id    uuid,
  claimed_at   timestamptz not null,
  finished_at  timestamptz not null default now(),
  -- succeeded | failed (retried) | failed_final | handed_back | lost | lost_uncharged
  outcome      text not null,
  charged      boolean not null,
  error        jsonb,
  primary key (job_id, execution)
);

-- One row per recorded step, unique per job and step name (DESIGN.md, ledger).
create table acta.steps (
  job_id       bigint not null,
  name         text not null,
  execution    integer not null,
  result       jsonb,
  recorded_at  timestamptz not null default now(),
  primary key (job_id, name)
);

create table acta.workers (
  id                 uuid primary key,
  namespace          text not null,
  hostname           text not null,
  pid                integer not null,
  definitions        text[] not null,
  status             text not null default 'alive' check (status in ('alive', 'stopped', 'dead')),
  started_at         timestamptz not null default now(),
  last_heartbeat_at  timestamptz not null default now(),
  stopped_at         timestamptz
);
create index workers_alive_idx on acta.workers (namespace, last_heartbeat_at) where status = 'alive';

insert into acta.namespaces (name) values ('default');
