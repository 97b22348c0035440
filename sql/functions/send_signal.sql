-- acta.send_signal: deliver a signal to a job's mailbox, and wake the job if it waits for it.
--
-- Contract: the job is p_id, or (p_id null) the job of the namespace whose idempotency key is
-- p_job_key. Returns one row (job_id, outcome): 'consumed' (the job was Waiting for p_name: it
-- takes the signal now and is Ready), 'queued' (kept in the mailbox until a wait of that name
-- consumes it), 'duplicate' (a signal of this name with p_idempotency_key was sent to the job
-- before: nothing new), 'ended' (the job has finished: nothing stored), 'not_found' (no such job
-- in the namespace; job_id null). A signal is never lost between a handler's wait and its park:
-- this call holds the job's row lock from its read to its commit, and the park's
-- acta.settle_waits reads the mailbox after taking it (docs/workflows.md).
-- Locks: the job row FOR UPDATE until commit (in a caller's transaction, until it commits).
-- Durability: the caller's commit. Plan: by primary key or jobs_idempotency_key_idx.
create or replace function acta.send_signal(
  p_namespace        text,
  p_id               bigint,
  p_job_key          text,
  p_name             text,
  p_payload          jsonb,
  p_idempotency_key  text
) returns table (job_id bigint, outcome text)
language plpgsql
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_job       record;
  v_signal    bigint;
begin
  select j.id, j.status, j.wait_names, j.wait_step into v_job
  from acta.jobs j
  where j.namespace = p_namespace
    and (case when p_id is not null then j.id = p_id else j.idempotency_key = p_job_key end)
  for update;
  if not found then
    -- A success moved out of acta.jobs (acta.complete_executions) has ended: never keyed, so by id.
    return query select s.id, 'ended'::text from acta.succeeded_jobs s where s.namespace = p_namespace and s.id = p_id
                 union all select null::bigint, 'not_found'::text
                 limit 1;
    return;
  end if;
  if v_job.status in ('succeeded', 'failed', 'cancelled') then
    return query select v_job.id, 'ended'::text;
    return;
  end if;
  insert into acta.signals (job_id, name, payload, idempotency_key)
  values (v_job.id, p_name, p_payload, p_idempotency_key)
  on conflict (job_id, name, idempotency_key) where idempotency_key is not null do nothing
  returning id into v_signal;
  if v_signal is null then
    return query select v_job.id, 'duplicate'::text;
    return;
  end if;
  if v_job.status = 'waiting' and p_name = any (v_job.wait_names) then
    update acta.signals s set consumed_at = now(), consumed_step = v_job.wait_step where s.id = v_signal;
    perform acta.wake_job(v_job.id, jsonb_build_object('name', p_name, 'payload', p_payload));
    return query select v_job.id, 'consumed'::text;
    return;
  end if;
  return query select v_job.id, 'queued'::text;
end
$$;
