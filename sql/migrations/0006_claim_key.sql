-- jobs_due_idx and jobs_claim_idx lead with one fixed-width key for the queue a row is in,
-- hashtextextended(namespace || '/' || definition, 0) (a bigint), instead of the two text columns
-- (migrations 0003 and 0005). Every Ready row of a definition shares those two texts, so each
-- comparison inside the B-tree went past both to reach the due time and id: variable-width
-- columns first leave PostgreSQL no cached offsets for the ones after them (nocache_index_getattr).
-- Counted (`ACTA_ENQUEUE_ONLY=1 bash bench/server-instructions.sh "" 1 20000`: one enqueue_jobs call
-- of 20,000 jobs in a single-user backend): 88,812 instructions per enqueued job with the text-led
-- indexes, 62,710 with these (jobs_due_idx alone had cost ~22,700 of the 88,812). The key only
-- narrows the range: acta.claim_jobs still checks namespace and definition on each row, so two
-- queues whose texts hash alike share a range and nothing else.
drop index acta.jobs_due_idx;
create index jobs_due_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), run_at, id) where status = 'ready';
drop index acta.jobs_claim_idx;
create index jobs_claim_idx on acta.jobs (hashtextextended(namespace || '/' || definition, 0), priority desc, run_at, id) where status = 'ready';
