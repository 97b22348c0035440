import type { RetentionAges } from '../../db/retention';
import { DEFAULT_FAILED_AGE_MS, DEFAULT_SUCCEEDED_AGE_MS, RETENTION_NAME } from '../../recurring/retention';
import type { MemoryJob, Store, Tx } from './state';

const FINISHED = ['succeeded', 'cancelled', 'failed'] as const;

/** prune_jobs' `keep`: a child whose parent has not finished stays. */
function mustStay(store: Store, j: MemoryJob): boolean {
  const parent = j.parentId === null ? undefined : store.jobs.get(j.parentId);
  return parent !== undefined && !(FINISHED as readonly string[]).includes(parent.status);
}

/**
 * acta.prune_jobs (sql/functions/prune_jobs.sql): up to `limit` finished rows of the namespace
 * older than their state's age, oldest first within a state, with their executions and steps;
 * rows that must stay are passed over. Nothing is ever locked here, so nothing is skipped.
 */
export function pruneJobs(store: Store, tx: Tx, args: { namespace: string; ages: RetentionAges; limit: number }): number {
  const ageOf = { succeeded: args.ages.succeededMs, cancelled: args.ages.cancelledMs, failed: args.ages.failedMs };
  const picked = new Set<number>();
  for (const status of FINISHED) {
    const age = ageOf[status];
    if (age === null) continue;
    const due = store
      .jobsIn(args.namespace)
      .filter((j) => j.status === status && j.finishedAt !== null && j.finishedAt < tx.now - age && !mustStay(store, j))
      .sort((a, b) => (a.finishedAt as number) - (b.finishedAt as number));
    for (const j of due) {
      if (picked.size >= args.limit) break;
      picked.add(j.id);
    }
  }
  store.deleteJobs(args.namespace, picked);
  return picked.size;
}

/**
 * Retention zero (complete_executions.sql, its end): where the namespace's sys.retention keeps
 * Succeeded rows 0 ms and is not paused, the rows a completion ended Succeeded are deleted, but a
 * child and a watched row, which the pass takes.
 */
export function deleteAtCompletion(store: Store, namespace: string, ended: MemoryJob[]): void {
  if (!retentionZero(store, namespace)) return;
  const ids = ended.filter((j) => j.namespace === namespace && j.status === 'succeeded' && j.parentId === null && !j.watched).map((j) => j.id);
  if (ids.length > 0) store.deleteJobs(namespace, new Set(ids));
}

/** The namespace's sys.retention keeps Succeeded rows 0 ms and is not paused. */
function retentionZero(store: Store, namespace: string): boolean {
  const s = store.schedule(namespace, RETENTION_NAME);
  const payload = s?.payload as { succeededMs?: unknown } | null | undefined;
  return s !== undefined && s !== null && !s.paused && payload?.succeededMs === 0;
}

/**
 * failure_rate's window as acta.evaluate_alerts narrows it: the least of `windowMs` and the ages the
 * namespace's sys.retention (not paused) keeps Succeeded and Failed rows (absent: the default; null
 * or not an age: no bound), so a rate never counts failures against successes already deleted.
 */
export function keptWindowMs(store: Store, namespace: string, windowMs: number): number {
  const s = store.schedule(namespace, RETENTION_NAME);
  const payload = s?.payload;
  if (!s || s.paused || payload === null || typeof payload !== 'object' || Array.isArray(payload)) return windowMs;
  const age = (v: unknown, fallback: number) => (v === undefined ? fallback : typeof v === 'number' && v >= 0 ? v : Infinity);
  const p = payload as { succeededMs?: unknown; failedMs?: unknown };
  return Math.min(windowMs, age(p.succeededMs, DEFAULT_SUCCEEDED_AGE_MS), age(p.failedMs, DEFAULT_FAILED_AGE_MS));
}

/** src/db/jobs.ts readAbsence: why the namespace has no job `id`. */
export function readAbsence(store: Store, namespace: string, id: string): { retentionZero: boolean; issued: boolean } {
  return { retentionZero: retentionZero(store, namespace), issued: store.issued(Number(id)) };
}
