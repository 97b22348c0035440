-- 0009_observe: a job followed to its result, and cancelled while it runs (docs/DESIGN.md, "The Rx
-- surface"; docs/rx.md, "A job as an Observable").
--
-- progress: the last value the running attempt reported with ctx.progress (acta.report_progress);
-- kept after the job ends, replaced by the next attempt's first report.
-- cancel_requested_at: set by acta.cancel_job on an Executing row. The row's worker hears it
-- (NOTIFY acta_jobs 'cancel:…', else its next heartbeat) and aborts the handler; whatever that attempt's
-- completion or recovery then writes, other than a success, ends the job Cancelled.
-- watched: a client observes the job (client.observe, client.result). Only then does a change of
-- the row send NOTIFY acta_job, so that jobs nobody follows cost their writes nothing but the
-- trigger's WHEN test.
alter table acta.jobs
  add column progress            jsonb,
  add column cancel_requested_at timestamptz,
  add column watched             boolean not null default false;

-- NOTIFY acta_job with the job's id when a watched row's status, attempt, progress or cancel
-- request changed; delivered at commit, once per id and transaction (PostgreSQL folds repeats).
create function acta.notify_job_changed() returns trigger
language plpgsql
as $$
begin
  perform pg_notify('acta_job', new.id::text);
  return null;
end
$$;

create trigger jobs_watched_notify
  after update on acta.jobs
  for each row
  when (new.watched and (old.status is distinct from new.status
                         or old.execution is distinct from new.execution
                         or old.progress is distinct from new.progress
                         or old.cancel_requested_at is distinct from new.cancel_requested_at
                         or not old.watched))
  execute function acta.notify_job_changed();
