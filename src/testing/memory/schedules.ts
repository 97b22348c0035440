/*
 * Schedules (migration 0013; docs/schedules.md): the declared ones reconciled with the applied
 * policies (acta.reconcile_schedules), the schedules pass (src/db/schedules.ts unarmedSchedules,
 * then acta.arm_schedules), a fire's claim, the recurring fire of a completion
 * (complete_executions.sql, "Recurring fire"), and the runtime pause and list.
 */
import type { ScheduleRecord } from '../../db/schedules';
import type { ClaimedFire, DeclaredSchedule } from '../../db/types';
import { armInstants, type UnparsableSchedule } from '../../recurring/schedules';
import { copyJson, type MemoryJob, type MemorySchedule, type Store, type Tx } from './state';

const ENDED = new Set(['succeeded', 'failed', 'cancelled']);

/** A fire job of `s` at `at`, Ready and due then, or null when that instant has its fire already (jobs_schedule_fire_idx: ON CONFLICT DO NOTHING). */
function insertFire(store: Store, tx: Tx, s: MemorySchedule, at: number): MemoryJob | null {
  if (store.hasFire(s.namespace, s.name, at)) return null;
  const job: MemoryJob = {
    id: store.nextId(), namespace: s.namespace, definition: s.definition, payload: copyJson(s.payload), status: 'ready', priority: s.priority, runAt: at,
    execution: 0, attempts: 0, maxAttempts: null, unchargedReturns: 0, leaseHolder: null, leaseExpiresAt: null, claimedAt: null, started: false,
    idempotencyKey: null, concurrencyKey: s.concurrencyKey, rateKey: s.rateKey, lane: s.lane, blockedBy: null, fairTag: null, progress: null, cancelRequestedAt: null,
    watched: false, result: null, error: null, createdAt: tx.now, finishedAt: null, waitNames: null, waitStep: null, waitUntil: null, parentId: null,
    childrenOpen: null, failParent: null, childrenFailed: null, schedule: s.name, scheduledAt: at,
  };
  store.insertJob(job);
  return job;
}

/**
 * Deletes the schedule's armed fire if it has not started (Ready, no attempt charged) and, given
 * `dueAfter`, is due only after it (a change keeps a fire whose instant has passed: docs/schedules.md,
 * "Changes"); true if it did.
 */
function unarm(store: Store, jobId: number | null, dueAfter?: number): boolean {
  const j = jobId === null ? undefined : store.jobs.get(jobId);
  if (!j || j.status !== 'ready' || j.execution !== 0 || j.schedule === null) return false;
  if (dueAfter !== undefined && j.runAt <= dueAfter) return false;
  store.deleteJob(j.id);
  return true;
}

/** acta.reconcile_schedules: the namespace's declared schedules of `names` made what their applied policies declare. */
export function reconcileSchedules(store: Store, tx: Tx, namespace: string, names: string[]): void {
  const defs = names.filter((n) => store.definition(namespace, n)?.policy != null).sort();
  if (defs.length === 0) return;
  const desired = new Map<string, DeclaredSchedule & { definition: string }>();
  // A name two definitions declare is the newest declaration's (registeredAt), then the first by name.
  const newestFirst = [...defs].sort((x, y) => store.definition(namespace, y)!.registeredAt - store.definition(namespace, x)!.registeredAt);
  for (const d of newestFirst) {
    for (const x of store.definition(namespace, d)!.policy!.schedules ?? []) if (!desired.has(x.name)) desired.set(x.name, { ...x, definition: d });
  }
  const same = (s: MemorySchedule, d: DeclaredSchedule & { definition: string }) =>
    s.source === 'declared' && s.definition === d.definition && s.cron === d.cron && s.timeZone === d.timeZone &&
    JSON.stringify(s.payload) === JSON.stringify(d.payload) && s.catchUp === d.catchUp && s.catchUpWindowMs === d.catchUpWindowMs && s.priority === d.priority &&
    s.concurrencyKey === (d.concurrencyKey ?? null) && s.rateKey === (d.rateKey ?? null) && s.lane === (d.lane ?? null);
  for (const s of store.schedulesIn(namespace)) {
    if (desired.has(s.name) || s.source !== 'declared' || !defs.includes(s.definition)) continue;
    unarm(store, s.jobId);
    store.deleteSchedule(namespace, s.name);
  }
  for (const [name, d] of desired) {
    const s = store.schedule(namespace, name);
    if (s && same(s, d)) continue;
    if (!s) {
      store.putSchedule({
        namespace, name, definition: d.definition, cron: d.cron, timeZone: d.timeZone, payload: copyJson(d.payload), catchUp: d.catchUp,
        catchUpWindowMs: d.catchUpWindowMs, priority: d.priority, concurrencyKey: d.concurrencyKey ?? null, rateKey: d.rateKey ?? null, lane: d.lane ?? null,
        source: 'declared', paused: false, version: 1, jobId: null, nextFireAt: null,
        lastFireAt: null, lastJobId: null, lastOutcome: null, createdAt: tx.now, updatedAt: tx.now,
      });
      continue;
    }
    // A fire that has started or is due stays the schedule's, its next armed at its end (docs/schedules.md, "Changes").
    const jobId = unarm(store, s.jobId, tx.now) ? null : s.jobId;
    Object.assign(s, {
      definition: d.definition, cron: d.cron, timeZone: d.timeZone, payload: copyJson(d.payload), catchUp: d.catchUp, catchUpWindowMs: d.catchUpWindowMs,
      priority: d.priority, concurrencyKey: d.concurrencyKey ?? null, rateKey: d.rateKey ?? null, lane: d.lane ?? null,
      source: 'declared', version: s.version + 1, jobId, nextFireAt: null, updatedAt: tx.now,
    });
  }
}

/**
 * The schedules pass: every schedule of the namespace with no fire armed or running and not paused
 * gets the next instant after its ended fire's (after now if none, or changed since: nextFireAt no
 * longer that fire's); how many were armed. One changed while its fire runs (nextFireAt null) gets
 * the pending instant after now, which that fire's end arms (acta.arm_schedules).
 */
export function armSchedules(store: Store, tx: Tx, namespace: string, onUnparsable?: (u: UnparsableSchedule) => void): number {
  const unarmed = store.schedulesIn(namespace).flatMap((s) => {
    const j = s.jobId === null ? undefined : store.jobs.get(s.jobId);
    if (s.paused || (j && !ENDED.has(j.status) && s.nextFireAt !== null)) return [];
    const afterFire = j && ENDED.has(j.status) && s.nextFireAt === j.scheduledAt ? new Date(j.scheduledAt as number) : null;
    return [{ name: s.name, version: s.version, cron: s.cron, timeZone: s.timeZone, afterFire, now: new Date(tx.now) }];
  });
  const { names, versions, instants } = armInstants(unarmed, onUnparsable);
  let armed = 0;
  names.forEach((name, i) => {
    const s = store.schedule(namespace, name);
    const at = instants[i];
    if (!s || s.version !== versions[i] || s.paused || at === null) return;
    const ended = s.jobId === null ? undefined : store.jobs.get(s.jobId);
    if (ended && !ENDED.has(ended.status)) {
      if (s.nextFireAt === null) Object.assign(s, { nextFireAt: at.getTime(), updatedAt: tx.now });
      return;
    }
    const fire = insertFire(store, tx, s, at.getTime());
    if (!fire) return;
    if (ended) Object.assign(s, { lastFireAt: ended.scheduledAt, lastJobId: ended.id, lastOutcome: ended.status });
    Object.assign(s, { jobId: fire.id, nextFireAt: at.getTime(), updatedAt: tx.now });
    armed++;
  });
  if (armed > 0) tx.notify(namespace);
  return armed;
}

/** A fire's claim: its instant, the claim's time and the schedule as it is now (claim_jobs.sql, `schedule`); undefined for every other job. */
export function claimedFire(store: Store, j: MemoryJob, now: number): ClaimedFire | undefined {
  if (j.schedule === null) return undefined;
  const s = store.schedule(j.namespace, j.schedule);
  const fire: ClaimedFire = { name: j.schedule, at: new Date(j.scheduledAt as number), claimedAt: new Date(now) };
  return s ? { ...fire, cron: s.cron, timeZone: s.timeZone, catchUp: s.catchUp, catchUpWindowMs: s.catchUpWindowMs, armed: s.jobId === j.id } : fire;
}

/**
 * The recurring fire of a completion: each schedule's armed fire that ended for good records its
 * outcome ('skipped' for a skip) and arms `nextAt` (later than its instant), or, the schedule
 * changed while it ran, the pending instant (none yet: nothing), unless the schedule is paused or
 * gone. The schedule's last fire, no longer armed and ended again (retried by hand), updates the
 * last outcome only. True when any ended.
 */
export function fireEnded(store: Store, tx: Tx, ended: { job: MemoryJob; outcome: string; nextAt: number | null }[]): boolean {
  for (const { job } of ended) {
    const s = store.schedule(job.namespace, job.schedule as string);
    if (s && s.jobId !== job.id && s.lastJobId === job.id) Object.assign(s, { lastOutcome: job.status, updatedAt: tx.now });
  }
  for (const { job, outcome, nextAt } of ended) {
    const s = store.schedule(job.namespace, job.schedule as string);
    if (!s || s.jobId !== job.id) continue;
    const at = s.nextFireAt === job.scheduledAt ? nextAt : s.nextFireAt;
    const fire = !s.paused && at !== null && at > (job.scheduledAt as number) ? insertFire(store, tx, s, at) : null;
    Object.assign(s, { jobId: fire?.id ?? null, nextFireAt: fire ? at : null, lastFireAt: job.scheduledAt, lastJobId: job.id, lastOutcome: outcome, updatedAt: tx.now });
  }
  return ended.length > 0;
}

/** A runtime pause (its unstarted armed fire deleted, and with it the next fire) or resume; false: no such schedule. */
export function pauseSchedule(store: Store, tx: Tx, namespace: string, name: string, paused: boolean): boolean {
  const s = store.schedule(namespace, name);
  if (!s) return false;
  s.paused = paused;
  s.updatedAt = tx.now;
  const j = s.jobId === null ? undefined : store.jobs.get(s.jobId);
  if (paused && j && j.status === 'ready' && j.execution === 0) {
    unarm(store, j.id);
    s.jobId = null;
    s.nextFireAt = null;
  }
  return true;
}

/** The namespace's schedules (or the one named), as client.schedules.list shows them. */
export function listSchedules(store: Store, namespace: string, name?: string): ScheduleRecord[] {
  const date = (ms: number | null) => (ms === null ? null : new Date(ms));
  return store.schedulesIn(namespace).filter((s) => name === undefined || s.name === name).map((s) => ({
    name: s.name, definition: s.definition, cron: s.cron, timeZone: s.timeZone, payload: copyJson(s.payload), catchUp: s.catchUp,
    catchUpWindowMs: s.catchUpWindowMs, priority: s.priority, concurrencyKey: s.concurrencyKey, rateKey: s.rateKey, lane: s.lane,
    source: s.source, paused: s.paused, nextFireAt: date(s.nextFireAt), jobId: s.jobId === null ? null : String(s.jobId),
    lastFireAt: date(s.lastFireAt), lastJobId: s.lastJobId === null ? null : String(s.lastJobId), lastOutcome: s.lastOutcome,
  }));
}
