-- A job's maxAttempts is its own when given at enqueue, else its definition's, else 25.
--
-- Under 0001 every row got a number at enqueue (25 unless the job or the client's copy of its
-- definition gave one); the worker then applied the smaller of the row's and its definition's,
-- and recovery (in SQL, without the definitions) only the row's. So a job's own maxAttempts above
-- its definition's was capped by the definition, and a job enqueued by name whose definition
-- allows 3 attempts could be charged 25 lost attempts by recovery.
-- Now max_attempts is null unless the job gave one. acta.definitions holds each definition's
-- policy for recovery: as the most recently started live worker running it declared it
-- (acta.register_worker writes it; acta.stop_worker and a recovery pass that marks a worker dead
-- hand it back to the newest live worker still running the definition: acta.refresh_definitions),
-- else as the last one declared it. The worker that runs an attempt applies its own definition.
-- Policies to come (concurrency keys, rate limits, lanes) belong in this table.
alter table acta.jobs alter column max_attempts drop not null, alter column max_attempts drop default;

-- Unfinished rows holding 25, the old column default, most likely never chose it: their
-- definition's applies from now on, as it did through the old min(row, definition) (an
-- adversarial trial: a definition of 3 attempts ran such a row 25 times after the upgrade). Other
-- numbers were chosen by the job or its client, and now win over the definition's.
update acta.jobs set max_attempts = null
where max_attempts = 25 and status in ('ready', 'executing', 'waiting');

create table acta.definitions (
  namespace     text not null,
  name          text not null,
  -- null: the default (25, PIPELINE.maxAttempts).
  max_attempts  integer check (max_attempts >= 1),
  registered_at timestamptz not null default now(),
  primary key (namespace, name)
);

-- Each worker's declared maxAttempts, in parallel with its definitions (null: registered before
-- this migration), so a stopped or dead worker's declaration can be handed back to a live one's.
alter table acta.workers add column max_attempts integer[];
