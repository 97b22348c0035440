-- 0013_schedules: cron schedules as recurring slots (docs/DESIGN.md, "Workflows" and "Decisions for
-- recurring work"; docs/schedules.md).
--
-- A schedule's fire is an ordinary job row (jobs.schedule, jobs.scheduled_at: its schedule and
-- scheduled instant), due at that instant and claimed like any job. The fire's completion arms the
-- next instant in the same acta.complete_executions call; a fire that ends elsewhere (recovery, a
-- cancel) or a schedule added, changed or resumed is armed by the schedules pass
-- (acta.arm_schedules). One fire per (schedule, scheduled instant) is the unique index below,
-- written in the transaction that arms it: no leader, and no worker's clock, decides a fire.
-- Plain jobs pay nothing: both columns are null on them, and only fire rows enter the index.

create table acta.schedules (
  namespace          text not null,
  name               text not null,
  definition         text not null,
  cron               text not null,
  time_zone          text not null default 'UTC',
  payload            jsonb not null default 'null',
  catch_up           text not null default 'latest' check (catch_up in ('latest', 'all', 'none')),
  catch_up_window_ms bigint check (catch_up_window_ms >= 0),
  -- 'declared': in code on a definition, reconciled by acta.reconcile_schedules at every
  -- registration; 'runtime': client.schedules.add.
  source             text not null check (source in ('declared', 'runtime')),
  paused             boolean not null default false,
  -- Bumped by every change of the fields above (cron, zone, payload, catch-up, definition).
  version            integer not null default 1,
  -- The fire armed or running now (null: none: a pass arms one unless paused) and its instant.
  job_id             bigint,
  next_fire_at       timestamptz,
  -- The last fire that ended: its instant, job and outcome (succeeded, failed, cancelled, skipped).
  last_fire_at       timestamptz,
  last_job_id        bigint,
  last_outcome       text,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  primary key (namespace, name)
);

alter table acta.jobs
  add column schedule     text,
  add column scheduled_at timestamptz;

create unique index jobs_schedule_fire_idx on acta.jobs (namespace, schedule, scheduled_at)
  where schedule is not null;
