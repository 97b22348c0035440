-- acta.claimed_fire: what acta.claim_jobs returns in its `schedule` column for a claimed fire of a
-- schedule (docs/schedules.md): its instant, the claim's time and the schedule as it is now.
--
-- Contract: p_job is a fire row of schedule p_schedule at p_scheduled_at, claimed at p_claimed_at;
-- armed: the schedule's armed fire is this row. The schedule's fields are left out if the schedule
-- is gone (removed meanwhile).
-- Why a function: acta.claim_jobs calls it only for a row whose schedule is set. As a sub-select of
-- the claim's statement, acta.schedules and its index were opened on every claim, fires or none:
-- 582 server instructions per job of a 128-row claim (bench/server-instructions.sh;
-- docs/decisions/2026-12-05-drain-recovered.md).
-- Locks: none (a read). Plan: by acta.schedules' primary key.
create or replace function acta.claimed_fire(
  p_namespace    text,
  p_schedule     text,
  p_scheduled_at timestamptz,
  p_claimed_at   timestamptz,
  p_job          bigint
) returns jsonb
language plpgsql
stable
-- PL/pgSQL: never inlined into the caller's statement (see above).
as $$
begin
  return jsonb_build_object('name', p_schedule, 'at', p_scheduled_at, 'claimedAt', p_claimed_at)
         || coalesce((select jsonb_build_object('cron', s.cron, 'timeZone', s.time_zone, 'catchUp', s.catch_up,
                                                'catchUpWindowMs', s.catch_up_window_ms, 'armed', s.job_id = p_job)
                      from acta.schedules s where s.namespace = p_namespace and s.name = p_schedule), '{}');
end
$$;
