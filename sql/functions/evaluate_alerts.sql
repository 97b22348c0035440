-- acta.evaluate_alerts(namespace, thresholds…, on_alert) -> the namespace's alerts, with what this call changed.
-- Contract: evaluates every rule of docs/alerts.md in one statement, then raises each (rule,
-- subject) whose condition holds and was not raised (a new incident: raised_at = now(),
-- resolved_at null) and resolves each raised one whose condition no longer holds. Returns every row
-- of acta.alerts of the namespace after that; `change` is 'raised' or 'resolved' for the rows this
-- call changed, else null. Resolved rows older than p_keep_resolved_ms are deleted first.
-- With p_on_alert, one job of that definition per change is enqueued (acta.enqueue_jobs) in this
-- transaction, in (rule, subject) order, keyed by its name for each policy it declares, payload { rule, subject, change, raisedAt, resolvedAt,
-- detail }: delivered durably. raisedAt and resolvedAt are ISO 8601 text in UTC to the millisecond,
-- as JavaScript's toISOString() writes the Date the log line has, truncated (test/db/alerts.test.ts).
-- Rules: worker_dead (a worker recovery marked dead whose last heartbeat is within
-- p_dead_window_ms), no_live_worker (a declared definition with a Ready row due and no live worker
-- declaring it), oldest_ready (its oldest due Ready row waited past p_ready_age_ms): neither for a
-- definition acta.pauses holds (its own pause or the namespace's), failure_rate
-- (of its jobs that ended within p_failure_window_ms, narrowed to what sys.retention keeps, at least p_failure_min_jobs, the Failed share
-- at least p_failure_rate), schedule_late (a schedule's armed fire, Ready, due more than
-- p_schedule_late_ms ago and not claimed; resolved once it is claimed; none for a fire whose
-- definition acta.pauses holds, as oldest_ready).
-- Locks: the namespace's alerts advisory lock (two evaluations never interleave), the alert rows
-- it changes. Reads jobs and workers without locks. Durability: the caller's commit.
-- Plan: jobs_due_idx per declared definition not paused (acta.pauses by its key); jobs_finished_idx over the window's Failed rows, and
-- over its Succeeded rows only when some definition has failures in it; the namespace's schedules
-- by their key, each armed fire by jobs_pkey and its pause by acta.pauses' key; sequential scans
-- off (see acta.prune_jobs), acta.workers and acta.definitions read whole; no JIT.
drop function if exists acta.evaluate_alerts(text, bigint, bigint, bigint, double precision, integer, bigint, text);
create or replace function acta.evaluate_alerts(
  p_namespace         text,
  p_dead_window_ms    bigint,
  p_ready_age_ms      bigint,
  p_failure_window_ms bigint,
  p_failure_rate      double precision,
  p_failure_min_jobs  integer,
  p_keep_resolved_ms  bigint,
  p_schedule_late_ms  bigint,
  p_on_alert          text
) returns table (rule text, subject text, change text, raised_at timestamptz, resolved_at timestamptz, detail jsonb)
language plpgsql
set enable_seqscan = off
-- No JIT: with sequential scans off, the read of acta.workers (no index for its dead rows) costs
-- past jit_above_cost, and compiling the statement took about 1 s per evaluation against 20 ms
-- for the whole call (test/db/alerts.test.ts, "never JIT-compiled").
set jit = off
as $$
#variable_conflict use_column
declare
  v_failed   jsonb;
  v_changes  jsonb;
  v_window   bigint := p_failure_window_ms;
  v_ckey     text;
  v_rkey     text;
  v_lane     text;
begin
  perform pg_advisory_xact_lock(hashtextextended('acta.alerts/' || p_namespace, 0));

  delete from acta.alerts a
  where a.namespace = p_namespace and a.resolved_at < now() - p_keep_resolved_ms * interval '1 millisecond';

  -- failure_rate judges only the time the namespace's sys.retention (not paused) keeps both
  -- outcomes: a Succeeded or Failed row past its age is deleted, and a rate over what is left would
  -- count failures against successes already gone (under retention zero, none: every failure a
  -- 100 % rate). The window is the least of failureWindowMs and those two ages (an absent age: its
  -- default, src/recurring/retention.ts, 1 day and 7 days; null, kept for ever: no bound; one that is
  -- no age fails every pass, which deletes nothing: no bound). docs/alerts.md, "Rules";
  -- test/ledger/retentionZero.ts, "failure_rate judges".
  select least(p_failure_window_ms::numeric,
               case when not (s.payload ? 'succeededMs') then 86400000
                    when jsonb_typeof(s.payload -> 'succeededMs') = 'number'
                    then case when (s.payload ->> 'succeededMs')::numeric >= 0 then (s.payload ->> 'succeededMs')::numeric end end,
               case when not (s.payload ? 'failedMs') then 604800000
                    when jsonb_typeof(s.payload -> 'failedMs') = 'number'
                    then case when (s.payload ->> 'failedMs')::numeric >= 0 then (s.payload ->> 'failedMs')::numeric end end)::bigint
  into v_window
  from acta.schedules s
  where s.namespace = p_namespace and s.name = 'sys.retention' and not s.paused and jsonb_typeof(s.payload) = 'object';
  v_window := coalesce(v_window, p_failure_window_ms);

  -- Failed rows are few; the definitions that have some in the window, with their count.
  select jsonb_object_agg(f.definition, f.n) into v_failed
  from (select j.definition, count(*) as n
        from acta.jobs j
        where hashtextextended(j.namespace || '/' || j.status, 0) = hashtextextended(p_namespace || '/failed', 0)
          and j.namespace = p_namespace and j.status = 'failed' and j.finished_at is not null
          and j.finished_at > now() - v_window * interval '1 millisecond'
        group by j.definition) f;

  with declared as (
    select d.name,
           (select j.run_at from acta.jobs j
            where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(p_namespace || '/' || d.name, 0)
              and j.namespace = p_namespace and j.definition = d.name
              and j.status = 'ready' and j.blocked_by is null and j.fair_tag is null
            order by hashtextextended(j.namespace || '/' || j.definition, 0), j.run_at, j.id
            limit 1) as oldest_run_at
    from acta.definitions d
    where d.namespace = p_namespace
      -- A pause (the definition's or the whole namespace's, '', as acta.claim_jobs reads them) holds
      -- its due rows for a resume, not for a worker: no oldest_ready or no_live_worker for them, as
      -- acta namespaces counts them under OLDEST PAUSED (docs/alerts.md; test/db/alerts.test.ts).
      and not exists (select 1 from acta.pauses p where p.namespace = p_namespace and p.definition in ('', d.name))
  ),
  live as (
    select distinct x.name
    from acta.workers w cross join lateral unnest(w.definitions) as x(name)
    where w.namespace = p_namespace and w.status = 'alive'
  ),
  succeeded as (
    select j.definition, count(*) as n
    from acta.all_jobs j
    where v_failed is not null
      and hashtextextended(j.namespace || '/' || j.status, 0) = hashtextextended(p_namespace || '/succeeded', 0)
      and j.namespace = p_namespace and j.status = 'succeeded' and j.finished_at is not null
      and j.finished_at > now() - v_window * interval '1 millisecond'
      and j.definition in (select jsonb_object_keys(v_failed))
    group by j.definition
  ),
  -- detail's instants are text as raisedAt and resolvedAt are (below): toISOString()'s form in UTC,
  -- not jsonb's, which follows the session's TimeZone (test/ledger/contract.ts, "detail's instants").
  holds (rule, subject, detail) as (
    select 'worker_dead', w.id::text,
           jsonb_build_object('hostname', w.hostname, 'pid', w.pid, 'lastHeartbeatAt', to_char(w.last_heartbeat_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
    from acta.workers w
    where w.namespace = p_namespace and w.status = 'dead'
      and w.last_heartbeat_at > now() - p_dead_window_ms * interval '1 millisecond'
    union all
    select 'no_live_worker', d.name, jsonb_build_object('oldestDueAt', to_char(d.oldest_run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
    from declared d
    where d.oldest_run_at <= now() and d.name not in (select l.name from live l)
    union all
    select 'oldest_ready', d.name,
           jsonb_build_object('oldestDueAt', to_char(d.oldest_run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'ageMs', floor(extract(epoch from now() - d.oldest_run_at) * 1000))
    from declared d
    where d.oldest_run_at < now() - p_ready_age_ms * interval '1 millisecond'
    union all
    select 'failure_rate', f.key,
           jsonb_build_object('failed', f.value::bigint, 'succeeded', coalesce(s.n, 0), 'windowMs', v_window)
    from jsonb_each_text(coalesce(v_failed, '{}')) f
    left join succeeded s on s.definition = f.key
    where f.value::bigint + coalesce(s.n, 0) >= p_failure_min_jobs
      and f.value::double precision / (f.value::bigint + coalesce(s.n, 0)) >= p_failure_rate
    union all
    select 'schedule_late', s.name,
           jsonb_build_object('definition', s.definition, 'scheduledAt', to_char(j.scheduled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                              'dueAt', to_char(j.run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                              'lateMs', floor(extract(epoch from now() - j.run_at) * 1000))
    from acta.schedules s
    join acta.jobs j on j.id = s.job_id
    where s.namespace = p_namespace and not s.paused
      and j.status = 'ready' and j.run_at < now() - p_schedule_late_ms * interval '1 millisecond'
      -- A pause of the fire's definition or of the namespace holds it for a resume, as `declared`.
      and not exists (select 1 from acta.pauses p where p.namespace = p_namespace and p.definition in ('', j.definition))
  ),
  raised as (
    insert into acta.alerts as a (namespace, rule, subject, raised_at, detail)
    select p_namespace, h.rule, h.subject, now(), h.detail from holds h
    on conflict (namespace, rule, subject) do update
      set raised_at = now(), resolved_at = null, detail = excluded.detail
      where a.resolved_at is not null
    returning a.rule, a.subject, a.raised_at, a.resolved_at, a.detail
  ),
  resolved as (
    update acta.alerts a set resolved_at = now()
    where a.namespace = p_namespace and a.resolved_at is null
      and not exists (select 1 from holds h where h.rule = a.rule and h.subject = a.subject)
    returning a.rule, a.subject, a.raised_at, a.resolved_at, a.detail
  )
  select jsonb_agg(jsonb_build_object('rule', c.rule, 'subject', c.subject, 'change', c.change,
                                      'raisedAt', to_char(c.raised_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                      'resolvedAt', to_char(c.resolved_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                      'detail', c.detail)
                   order by c.rule, c.subject)
    into v_changes
  from (select r.*, 'raised' as change from raised r
        union all
        select r.*, 'resolved' from resolved r) c;

  if p_on_alert is not null and v_changes is not null then
    -- Admitted by the onAlert definition's policies as it is stored: key functions cannot run here,
    -- so each policy it declares keys its jobs by its name (one concurrency limit, one rate meter,
    -- one lane in raise order), as sys.outbox keys a subscriber's (fan_out_events.sql; docs/alerts.md).
    select case when jsonb_typeof(d.policy -> 'concurrency') = 'object' then d.name end,
           case when jsonb_typeof(d.policy -> 'rate') = 'object' then d.name end,
           case when d.policy -> 'lane' = 'true'::jsonb then d.name end
      into v_ckey, v_rkey, v_lane
    from acta.definitions d
    where d.namespace = p_namespace and d.name = p_on_alert;
    perform acta.enqueue_jobs(p_namespace, array_fill(p_on_alert, array[jsonb_array_length(v_changes)]), v_changes,
                              null, null, null, null,
                              array_fill(v_ckey, array[jsonb_array_length(v_changes)]),
                              array_fill(v_rkey, array[jsonb_array_length(v_changes)]),
                              array_fill(v_lane, array[jsonb_array_length(v_changes)]));
  end if;

  return query
  select a.rule, a.subject, c.change, a.raised_at, a.resolved_at, a.detail
  from acta.alerts a
  left join jsonb_to_recordset(coalesce(v_changes, '[]')) as c(rule text, subject text, change text)
    on c.rule = a.rule and c.subject = a.subject
  where a.namespace = p_namespace
  order by a.rule, a.subject;
end
$$;
