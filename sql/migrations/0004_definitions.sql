-- A job's maxAttempts is its own when given at enqueue, else its definition's, else 25.
--
-- Under 0001 every row got a number at enqueue (25 unless the job or the client's copy of its
-- definition gave one); the worker then applied the smaller of the row's and its definition's,
-- and recovery (in SQL, without the definitions) only the row's. So a job's own maxAttempts above
-- its definition's was capped by the definition, and a job enqueued by name whose definition
-- allows 3 attempts could be charged 25 lost attempts by recovery.
-- Now max_attempts is null unless the job gave one. acta.definitions holds each definition's
-- policy as the last worker that registered it declared it (acta.register_worker upserts it at
-- every start; during a rolling deploy the last starter's version stands). The worker that runs
-- an attempt applies its own definition; recovery reads acta.definitions. Policies to come
-- (concurrency keys, rate limits, lanes) belong in this table.
-- Rows enqueued before this migration keep the number they were given (25 by default).
alter table acta.jobs alter column max_attempts drop not null, alter column max_attempts drop default;

create table acta.definitions (
  namespace     text not null,
  name          text not null,
  -- null: the default (25, PIPELINE.maxAttempts).
  max_attempts  integer check (max_attempts >= 1),
  registered_at timestamptz not null default now(),
  primary key (namespace, name)
);
