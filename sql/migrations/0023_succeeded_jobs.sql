-- 0023_succeeded_jobs: a succeeded job's row leaves the hot table at its completion
-- (docs/DESIGN.md, "The ledger"; docs/decisions/2026-12-06-succeeded-rows-leave-the-hot-table.md).
--
-- acta.succeeded_jobs holds the rows acta.complete_executions moves out of acta.jobs: a job that
-- succeeded and carries nothing another row or a unique index of acta.jobs needs while it is kept
-- (no parent, no idempotency key, no schedule, not watched). A delete writes no new row version and
-- no index entry in acta.jobs, whose claim indexes then only ever hold live rows; the row is
-- inserted here once, never updated, and is its last attempt's ledger record as well (no
-- acta.executions row for that attempt: acta.all_executions below shows it). The columns are acta.jobs' own, in its order, so that
-- acta.all_jobs can show both as one: a migration that adds a column to acta.jobs adds it here and
-- recreates the view (test/db/succeededJobs.test.ts compares the two).
-- Rows that succeeded before this migration stay in acta.jobs (nothing is moved here), as do the
-- rows not eligible: a reader of finished jobs reads acta.all_jobs.
-- Retention (acta.prune_jobs) reads succeeded_jobs_finished_idx, the same key as
-- jobs_finished_idx, so one range per namespace ends at its cutoff.
create table acta.succeeded_jobs (like acta.jobs);
alter table acta.succeeded_jobs add constraint succeeded_jobs_pkey primary key (id);
create index succeeded_jobs_finished_idx on acta.succeeded_jobs (hashtextextended(namespace || '/' || status, 0), finished_at);

create view acta.all_jobs as
  select * from acta.jobs
  union all
  select * from acta.succeeded_jobs;

-- The attempt ledger as a reader sees it: acta.executions, and the last attempt of each moved
-- success, recorded by its row alone (its worker in lease_holder; acta.complete_executions).
create view acta.all_executions as
  select e.job_id, e.execution, e.worker_id, e.claimed_at, e.finished_at, e.outcome, e.charged, e.error
  from acta.executions e
  union all
  select s.id, s.execution, s.lease_holder, s.claimed_at, s.finished_at, 'succeeded', true, null::jsonb
  from acta.succeeded_jobs s;
