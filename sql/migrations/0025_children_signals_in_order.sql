-- 0025_children_signals_in_order: a job's children and its signals in id order, so that a page of
-- them starts where the last ended (the dashboard's job page, src/ops/dashboard/queries.ts;
-- docs/dashboard.md, "Scale"; test/dashboard/plans.test.ts).
--
-- jobs_parent_idx (parent_id) and signals_job_idx (job_id) found a job's rows in no order a page can
-- resume from: a page of a parent's children read all of them and sorted them. Each index gains
-- id as its second column and keeps its name, so its readers (acta.cancel_job,
-- acta.job_descendants, acta.delete_job_references, ...) read it as before. Both are rebuilt in
-- the migration's transaction (only children enter jobs_parent_idx; one entry per signal).
drop index acta.jobs_parent_idx;
create index jobs_parent_idx on acta.jobs (parent_id, id) where parent_id is not null;
drop index acta.signals_job_idx;
create index signals_job_idx on acta.signals (job_id, id);
