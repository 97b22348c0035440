-- The claim's index leads with the definition: a worker claims only its own definitions
-- (acta.claim_jobs, "Plan"), and under 0001 its pick walked the namespace's Ready rows in claim
-- order, so the Ready rows of definitions it does not run that came first (another worker
-- pool's backlog, a definition no worker runs) were walked on every claim: a new-user trial
-- measured the pick at 0.33 ms on an empty namespace and 105-109 ms with 200,000 Ready rows of
-- another definition ahead. (jobs_due_idx stays as it was: the idle probe that uses it now
-- starts at now(), see acta.claim_jobs.)
drop index acta.jobs_claim_idx;
create index jobs_claim_idx on acta.jobs (namespace, definition, priority desc, run_at, id) where status = 'ready';
