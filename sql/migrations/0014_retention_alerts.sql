-- 0014_retention_alerts: what sys.retention and sys.alerts read and keep (docs/retention.md,
-- docs/alerts.md; docs/DESIGN.md, "Workflows").
--
-- jobs_finished_idx: a namespace's finished rows (Succeeded, Failed, Cancelled: exactly the rows
-- with a finished_at) per state in the order they finished, led by one bigint for the (namespace,
-- state) pair as the claim's indexes are (migration 0006). acta.prune_jobs deletes along it, one
-- range per state ending at that state's cutoff, so a batch reads only rows it deletes; the
-- failure-rate rule of acta.evaluate_alerts counts a window of it. Both check the two texts on
-- each row. It costs one index entry per job that ends (the completion's update is never HOT):
-- docs/decisions/2026-12-05-retention-index.md.
create index jobs_finished_idx on acta.jobs (hashtextextended(namespace || '/' || status, 0), finished_at)
  where finished_at is not null;

-- One row per alert (rule, subject) of a namespace: raised_at is when its current or last incident
-- began, resolved_at when it ended (null while it lasts). acta.evaluate_alerts raises and resolves
-- under the namespace's advisory lock, so each incident is raised once and resolved once.
create table acta.alerts (
  namespace    text not null,
  rule         text not null,
  subject      text not null,
  raised_at    timestamptz not null,
  resolved_at  timestamptz,
  detail       jsonb,
  primary key (namespace, rule, subject)
);
