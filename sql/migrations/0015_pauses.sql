-- 0015_pauses: pause and resume a namespace or one of its definitions, and the index of the admin
-- listings (docs/DESIGN.md, "Decisions for recurring work, workflows and operating").
--
-- A row of acta.pauses stops every claim of its scope (acta.claim_jobs reads the namespace's rows
-- with the definitions it reads already): definition '' is the whole namespace, any other a
-- definition of it. Running attempts are not touched: they finish, fenced as ever. Written only by
-- acta.pause and acta.resume, which wake the namespace's workers (NOTIFY acta_jobs).
create table acta.pauses (
  namespace   text not null,
  definition  text not null default '',
  -- Who paused and why, as the caller gave them (null: not said), and when (database clock).
  paused_by   text,
  reason      text,
  paused_at   timestamptz not null default now(),
  primary key (namespace, definition)
);

-- The admin listings (src/client/admin.ts): a namespace's Ready, Waiting, Failed and Cancelled jobs
-- of one status, newest first, read by keyset (id below the cursor). Not its Executing rows
-- (jobs_lease_idx holds those) nor its Succeeded ones (read along the primary key, newest first):
-- an entry per claim and per success cost the claim + completion 12 % more server instructions per
-- job (bench/server-instructions.sh), this one an entry per enqueue and per failure.
create index jobs_list_idx on acta.jobs (namespace, status, id) where status in ('ready', 'waiting', 'failed', 'cancelled');
