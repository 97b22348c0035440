/* The statements of schedules (migration 0013; docs/schedules.md): the schedules pass's read and
 * acta.arm_schedules, and the runtime operations of client.schedules. One round trip each. */
import type { Queryable } from './Db';
import type { DeclaredSchedule } from './types';
import type { UnarmedSchedule } from '../recurring/schedules';

/** A schedule as client.schedules.list and `acta schedule list` show it. */
export interface ScheduleRecord extends DeclaredSchedule {
  definition: string;
  source: 'declared' | 'runtime';
  paused: boolean;
  /** The armed (or running) fire's instant and job, or null. */
  nextFireAt: Date | null;
  jobId: string | null;
  /** The last fire that ended: its instant, job and outcome ('succeeded', 'failed', 'cancelled', 'skipped'). */
  lastFireAt: Date | null;
  lastJobId: string | null;
  lastOutcome: string | null;
}

const COLUMNS = `s.name, s.definition, s.cron, s.time_zone, s.payload, s.catch_up, s.catch_up_window_ms, s.priority, s.concurrency_key, s.rate_key, s.lane, s.source, s.paused,
  s.next_fire_at, s.job_id::text, s.last_fire_at, s.last_job_id::text, s.last_outcome`;

type Row = {
  name: string; definition: string; cron: string; time_zone: string; payload: unknown; catch_up: DeclaredSchedule['catchUp'];
  catch_up_window_ms: string | null; priority: number; concurrency_key: string | null; rate_key: string | null; lane: string | null; source: 'declared' | 'runtime'; paused: boolean; next_fire_at: Date | null; job_id: string | null;
  last_fire_at: Date | null; last_job_id: string | null; last_outcome: string | null;
};
const record = (r: Row): ScheduleRecord => ({
  name: r.name, definition: r.definition, cron: r.cron, timeZone: r.time_zone, payload: r.payload, catchUp: r.catch_up,
  catchUpWindowMs: r.catch_up_window_ms === null ? null : Number(r.catch_up_window_ms), priority: r.priority,
  concurrencyKey: r.concurrency_key, rateKey: r.rate_key, lane: r.lane, source: r.source, paused: r.paused,
  nextFireAt: r.next_fire_at, jobId: r.job_id, lastFireAt: r.last_fire_at, lastJobId: r.last_job_id, lastOutcome: r.last_outcome,
});

/**
 * The namespace's schedules that need a fire armed (none armed or running, not paused), or, changed
 * while a fire ran, their pending instant (next_fire_at null beside a fire not ended: acta.arm_schedules),
 * with the database's now(). The next instant comes after the ended fire's, unless the schedule was
 * changed since that fire was armed (next_fire_at no longer its instant): then after now().
 */
export async function unarmedSchedules(q: Queryable, namespace: string): Promise<UnarmedSchedule[]> {
  const { rows } = await q.query<{ name: string; version: number; cron: string; time_zone: string; after_fire: Date | null; now: Date }>(
    `select s.name, s.version, s.cron, s.time_zone,
            case when j.status in ('succeeded', 'failed', 'cancelled') and s.next_fire_at = j.scheduled_at then j.scheduled_at end as after_fire, now() as now
     from acta.schedules s
     left join acta.jobs j on j.id = s.job_id
     where s.namespace = $1 and not s.paused and (j.id is null or j.status in ('succeeded', 'failed', 'cancelled') or s.next_fire_at is null)
     order by s.name`,
    [namespace],
  );
  return rows.map((r) => ({ name: r.name, version: r.version, cron: r.cron, timeZone: r.time_zone, afterFire: r.after_fire, now: r.now }));
}

/** acta.arm_schedules: how many were armed. */
export async function armSchedules(q: Queryable, namespace: string, names: string[], versions: number[], instants: (Date | null)[]): Promise<number> {
  if (names.length === 0) return 0;
  const { rows } = await q.query<{ armed: number }>('select acta.arm_schedules($1, $2, $3, $4::timestamptz[]) as armed', [namespace, names, versions, instants.map((t) => t?.toISOString() ?? null)]);
  return rows[0]?.armed ?? 0;
}

export async function listSchedules(q: Queryable, namespace: string, name?: string): Promise<ScheduleRecord[]> {
  const { rows } = await q.query<Row>(`select ${COLUMNS} from acta.schedules s where s.namespace = $1 and ($2::text is null or s.name = $2) order by s.name`, [namespace, name ?? null]);
  return rows.map(record);
}

/** The stored zone of each of the namespace's schedules in `names` (by name): the spelling acta.put_schedule and acta.reconcile_schedules compare a declared zone with. */
export async function storedZones(q: Queryable, namespace: string, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const { rows } = await q.query<{ name: string; time_zone: string }>('select s.name, s.time_zone from acta.schedules s where s.namespace = $1 and s.name = any ($2)', [namespace, names]);
  return new Map(rows.map((r) => [r.name, r.time_zone]));
}

/**
 * acta.put_schedule: adds a runtime schedule or changes one (a new version, its armed fire deleted
 * if not claimed and not due yet): 'added', 'changed', 'same', or 'declared' (the name is a
 * declared schedule's: not touched). A changed schedule whose fire has started or is due keeps it:
 * the next instant is armed at that fire's end, never beside it (docs/schedules.md, "Changes").
 */
export async function putRuntimeSchedule(q: Queryable, namespace: string, definition: string, s: DeclaredSchedule): Promise<'added' | 'changed' | 'same' | 'declared'> {
  const { rows } = await q.query<{ answer: 'added' | 'changed' | 'same' | 'declared' }>(
    'select acta.put_schedule($1, $2, $3, $4, $5, $6::jsonb, $7, $8::bigint, $9::integer, $10, $11, $12) as answer',
    [namespace, s.name, definition, s.cron, s.timeZone, JSON.stringify(s.payload), s.catchUp, s.catchUpWindowMs, s.priority, s.concurrencyKey ?? null, s.rateKey ?? null, s.lane ?? null],
  );
  return rows[0].answer;
}

/** Pauses (its unstarted armed fire deleted, and with it the schedule's next fire) or resumes a schedule; false: no such schedule. */
export async function setSchedulePaused(q: Queryable, namespace: string, name: string, paused: boolean): Promise<boolean> {
  return (await changeSchedulePaused(q, namespace, name, paused)) !== null;
}

/**
 * setSchedulePaused, saying whether it changed anything (acta.pause_schedule): 'changed', 'same'
 * (it was paused, or running, already: nothing written), or null (no such schedule). `acta
 * schedule pause|resume` says which, as `acta pause|resume` do.
 */
export async function changeSchedulePaused(q: Queryable, namespace: string, name: string, paused: boolean): Promise<'changed' | 'same' | null> {
  const { rows } = await q.query<{ was: boolean | null }>('select acta.pause_schedule($1, $2, $3) as was', [namespace, name, paused]);
  const was = rows[0]?.was ?? null;
  if (was === null) return null;
  return was === paused ? 'same' : 'changed';
}

/** acta.remove_schedule: removes a runtime schedule and its unstarted armed fire: 'removed', 'declared' (kept: remove it from the code), or null (no such schedule). */
export async function removeSchedule(q: Queryable, namespace: string, name: string): Promise<'removed' | 'declared' | null> {
  const { rows } = await q.query<{ answer: 'removed' | 'declared' | null }>('select acta.remove_schedule($1, $2) as answer', [namespace, name]);
  return rows[0]?.answer ?? null;
}

/** A fire now, besides the schedule's own (its instant: clock_timestamp(), so two triggers in one transaction are two instants): a job of the schedule's definition, payload and priority; it arms nothing. Its job id, or null: no such schedule. */
export async function triggerSchedule(q: Queryable, namespace: string, name: string): Promise<string | null> {
  const { rows } = await q.query<{ id: string }>(
    `with fired as (
       insert into acta.jobs (namespace, definition, payload, priority, schedule, scheduled_at, concurrency_key, rate_key, lane)
       select s.namespace, s.definition, s.payload, s.priority, s.name, clock_timestamp(), s.concurrency_key, s.rate_key, s.lane
       from acta.schedules s where s.namespace = $1 and s.name = $2
       returning id
     ), wake as (select pg_notify('acta_jobs', $1) from fired)
     select id::text from fired, (select count(*) from wake) w`,
    [namespace, name],
  );
  return rows[0]?.id ?? null;
}
