-- 0019_signals_job_idx: a job's signals by job id, consumed or not, so acta.delete_jobs deletes them
-- with their job (the mailbox index, signals_mailbox_idx, holds only unconsumed ones). Signals are
-- few beside jobs: one entry each, off the claim's and the completion's paths.
create index signals_job_idx on acta.signals (job_id);
