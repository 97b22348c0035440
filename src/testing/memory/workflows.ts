/*
 * Signals and child jobs (sql/functions/wake_job.sql, settle_waits.sql, tell_parents.sql,
 * send_signal.sql, spawn_children.sql, release_waits.sql): the same decisions in memory.
 */
import type { EnqueueRows } from '../../db/jobs';
import type { JobId, StepRecord, StoredError } from '../../db/types';
import { childOutcomes, type ChildOutcome, type SendSignalArgs, type SignalOutcome } from '../../db/workflows';
import { enqueueJobs } from './jobs';
import { copyJson, jobIdOf, type MemoryJob, parseJsonb, type Store, type Tx } from './state';

const ENDED = new Set(['succeeded', 'failed', 'cancelled']);

/** acta.wake_job: a Waiting row Ready now, its wait's step recorded with `answer`. */
export function wakeJob(store: Store, tx: Tx, job: MemoryJob, answer: unknown): void {
  if (job.status !== 'waiting') return;
  const step = job.waitStep;
  job.status = 'ready';
  job.runAt = tx.now;
  job.waitNames = null;
  job.waitStep = null;
  job.waitUntil = null;
  if (step !== null) {
    let steps = store.steps.get(job.id);
    if (!steps) store.steps.set(job.id, (steps = new Map()));
    if (!steps.has(step)) steps.set(step, { jobId: job.id, name: step, execution: job.execution, result: copyJson(answer), recordedAt: tx.now });
  }
  tx.notify(job.namespace);
}

/** acta.settle_waits: parked rows whose wait is answered already run again. */
export function settleWaits(store: Store, tx: Tx, ids: number[]): void {
  for (const id of [...ids].sort((a, b) => a - b)) {
    const job = store.jobs.get(id);
    if (!job || job.status !== 'waiting') continue;
    if (job.waitNames !== null) {
      const names = job.waitNames;
      const signal = store.signals.find((s) => s.jobId === id && s.consumedAt === null && names.includes(s.name));
      if (signal) {
        signal.consumedAt = tx.now;
        signal.consumedStep = job.waitStep;
        wakeJob(store, tx, job, { name: signal.name, payload: signal.payload });
      }
    } else if ((job.childrenOpen ?? 0) === 0 || job.childrenFailed === true) {
      wakeJob(store, tx, job, {});
    }
  }
}

/** acta.tell_parents: one element per ended child. */
export function tellParents(store: Store, tx: Tx, parents: number[], failed: boolean[]): void {
  const byParent = new Map<number, { n: number; failed: boolean }>();
  parents.forEach((p, i) => {
    const e = byParent.get(p) ?? { n: 0, failed: false };
    e.n++;
    e.failed ||= failed[i];
    byParent.set(p, e);
  });
  for (const [id, e] of [...byParent].sort((a, b) => a[0] - b[0])) {
    const parent = store.jobs.get(id);
    if (!parent) continue;
    parent.childrenOpen = Math.max((parent.childrenOpen ?? 0) - e.n, 0);
    if (e.failed) parent.childrenFailed = true;
    if (parent.status === 'waiting' && parent.waitNames === null && (parent.childrenOpen === 0 || parent.childrenFailed === true)) wakeJob(store, tx, parent, {});
  }
}

/** acta.send_signal. */
export function sendSignal(store: Store, tx: Tx, a: SendSignalArgs): { jobId: JobId | null; outcome: SignalOutcome } {
  const job =
    a.jobId !== null ? store.jobs.get(jobIdOf(a.jobId)) : store.jobsIn(a.namespace).find((j) => j.idempotencyKey === a.jobKey);
  if (!job || job.namespace !== a.namespace) return { jobId: null, outcome: 'not_found' };
  const jobId = String(job.id);
  if (ENDED.has(job.status)) return { jobId, outcome: 'ended' };
  if (a.idempotencyKey !== null && store.signals.some((s) => s.jobId === job.id && s.name === a.name && s.idempotencyKey === a.idempotencyKey)) {
    return { jobId, outcome: 'duplicate' };
  }
  const payload = parseJsonb(a.payloadJson);
  const signal = { id: store.signals.length + 1, jobId: job.id, name: a.name, payload, idempotencyKey: a.idempotencyKey, sentAt: tx.now, consumedAt: null as number | null, consumedStep: null as string | null };
  store.signals.push(signal);
  if (job.status === 'waiting' && job.waitNames !== null && job.waitNames.includes(a.name)) {
    signal.consumedAt = tx.now;
    signal.consumedStep = job.waitStep;
    wakeJob(store, tx, job, { name: a.name, payload });
    return { jobId, outcome: 'consumed' };
  }
  return { jobId, outcome: 'queued' };
}

/** acta.release_waits: signal waits whose timeout passed run again, timed out. */
export function releaseWaits(store: Store, tx: Tx, namespace: string): number {
  const due = store
    .jobsIn(namespace)
    .filter((j) => j.status === 'waiting' && j.waitUntil !== null && j.waitUntil <= tx.now)
    .sort((a, b) => (a.waitUntil as number) - (b.waitUntil as number) || a.id - b.id)
    .slice(0, 1000);
  for (const j of due) wakeJob(store, tx, j, { timedOut: true });
  return due.length;
}

/** acta.spawn_children. */
export function spawnChildren(store: Store, tx: Tx, a: { workerId: string; parentId: JobId; execution: number; step: string; rows: EnqueueRows; failParent: boolean[] }): StepRecord {
  const parent = store.jobs.get(jobIdOf(a.parentId));
  if (!parent || parent.execution !== a.execution || parent.status !== 'executing' || parent.leaseHolder !== a.workerId) return { status: 'stale', result: null };
  parent.started = true;
  let steps = store.steps.get(parent.id);
  if (!steps) store.steps.set(parent.id, (steps = new Map()));
  const recorded = steps.get(a.step);
  if (recorded) return { status: 'exists', result: copyJson(recorded.result) };
  if (parent.cancelRequestedAt !== null) return { status: 'cancelled', result: null };
  const made = enqueueJobs(store, tx, parent.namespace, a.rows);
  made.forEach((m, i) => {
    if (!m.created || m.id === null) return;
    const child = store.jobs.get(jobIdOf(m.id))!;
    child.parentId = parent.id;
    child.failParent = a.failParent[i] ?? false;
  });
  parent.childrenOpen = (parent.childrenOpen ?? 0) + made.filter((m) => m.created).length;
  // The lanes held by the parent and its ancestors that have not ended (spawn_children.sql, Contract).
  const held = new Set<string>();
  for (let j: MemoryJob | undefined = parent; j && (j.status === 'executing' || j.status === 'waiting'); j = j.parentId === null ? undefined : store.jobs.get(j.parentId)) {
    if (j.lane !== null) held.add(j.lane);
  }
  const inLane = made.flatMap((m, i) => {
    const lane = a.rows.lanes?.[i];
    return m.created && lane != null && held.has(lane) ? [i] : [];
  });
  const result = inLane.length > 0 ? { ids: made.map((m) => m.id as string), inLane } : { ids: made.map((m) => m.id as string) };
  steps.set(a.step, { jobId: parent.id, name: a.step, execution: a.execution, result, recordedAt: tx.now });
  return { status: 'recorded', result: copyJson(result) };
}

/** src/db/workflows.ts readChildren. */
export function readChildren(store: Store, _parentId: JobId, ids: JobId[]): ChildOutcome[] {
  const rows = ids
    .map((id) => store.jobs.get(jobIdOf(id)))
    .filter((j): j is MemoryJob => j !== undefined)
    .map((j) => ({ id: String(j.id), status: j.status, result: copyJson(j.result), error: copyJson(j.error) as StoredError | null }));
  return childOutcomes(ids, rows);
}
