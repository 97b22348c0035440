-- jobs_due_idx leads with the definition, like jobs_claim_idx (migration 0003): within one
-- definition its Ready rows in due order (then id, the claim's tie-break), so "the first rows of
-- this definition due now" and "the next one due later" are each a range that ends where the
-- answer does (acta.claim_jobs, "Plan").
--
-- Under 0001 it was (namespace, run_at): the idle claim's next-due probe walked every Ready row of
-- the namespace due later than now and before the first one of the worker's definitions (an
-- adversarial trial: 100,000 rows of another definition due in a minute, 100,001 entries and 54 ms
-- per idle claim; 200,000 for a definition with no rows). And the claim's pick, walking
-- jobs_claim_idx in claim order (priority first), could not stop at the first row due later: with
-- fewer rows due than it asks for it walked every Ready row of its definition due later (3 due
-- and 100,000 due in an hour: 21-34 ms per 8-row claim against ~1 ms). The pick now takes the due
-- rows along this index first (test/db/plans.test.ts).
drop index acta.jobs_due_idx;
create index jobs_due_idx on acta.jobs (namespace, definition, run_at, id) where status = 'ready';
