-- 0016_workflows: signals and child jobs (docs/DESIGN.md, "Workflows" and "Decisions for recurring
-- work, workflows and operating"; docs/workflows.md).
--
-- A parked row is status 'waiting', written only by acta.complete_executions' wait shapes;
-- wait_until is its signal wait's timeout (null: none). wait_step is the step
-- its wake records (the wait's answer: acta.wake_job); wait_names the signal names it waits for
-- (null: it waits for its children). A plain job leaves every new column null.
alter table acta.jobs
  add column wait_names      text[],
  add column wait_step       text,
  add column wait_until      timestamptz,
  -- A parent's children spawned and not ended yet (acta.spawn_children, acta.tell_parents).
  add column children_open   integer,
  -- A child whose failure, cancel or delete fails its parent's wait ('fail-parent').
  add column fail_parent     boolean,
  -- A parent one of whose 'fail-parent' children ended without success.
  add column children_failed boolean;

-- Parked rows by timeout (acta.release_waits, from each heartbeat); only waiting rows enter.
create index jobs_waits_due_idx on acta.jobs (namespace, wait_until) where status = 'waiting' and wait_until is not null;
-- A parent's children (waitForChildren's outcomes, cancelling a parent); only children enter.
create index jobs_parent_idx on acta.jobs (parent_id) where parent_id is not null;

-- The mailbox: one row per signal sent to a job (acta.send_signal), kept until a wait of its name
-- consumes it (oldest first), then kept as consumed (consumed_at, the step it answered).
create table acta.signals (
  id               bigint generated always as identity primary key,
  job_id           bigint not null,
  name             text not null,
  payload          jsonb,
  idempotency_key  text,
  sent_at          timestamptz not null default now(),
  consumed_at      timestamptz,
  consumed_step    text
);
create index signals_mailbox_idx on acta.signals (job_id, name, id) where consumed_at is null;
create unique index signals_idempotency_idx on acta.signals (job_id, name, idempotency_key)
  where idempotency_key is not null;

-- A child deleted before it ended (an admin delete, retention) counts as ended for its parent.
create function acta.jobs_child_deleted() returns trigger
language plpgsql
as $$
begin
  perform acta.tell_parents(array[old.parent_id], array[coalesce(old.fail_parent, false)]);
  return null;
end
$$;

create trigger jobs_child_deleted
  after delete on acta.jobs
  for each row
  when (old.parent_id is not null and old.status not in ('succeeded', 'failed', 'cancelled'))
  execute function acta.jobs_child_deleted();
