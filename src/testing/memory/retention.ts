import type { RetentionAges } from '../../db/retention';
import type { Store, Tx } from './state';

const FINISHED = ['succeeded', 'cancelled', 'failed'] as const;

/**
 * acta.prune_jobs (sql/functions/prune_jobs.sql): up to `limit` finished rows of the namespace
 * older than their state's age, oldest first within a state, with their executions and steps. Its jobs have no parent (no
 * child jobs yet), and nothing is ever locked here, so nothing is skipped.
 */
export function pruneJobs(store: Store, tx: Tx, args: { namespace: string; ages: RetentionAges; limit: number }): number {
  const ageOf = { succeeded: args.ages.succeededMs, cancelled: args.ages.cancelledMs, failed: args.ages.failedMs };
  const picked = new Set<number>();
  for (const status of FINISHED) {
    const age = ageOf[status];
    if (age === null) continue;
    const due = store
      .jobsIn(args.namespace)
      .filter((j) => j.status === status && j.finishedAt !== null && j.finishedAt < tx.now - age)
      .sort((a, b) => (a.finishedAt as number) - (b.finishedAt as number));
    for (const j of due) {
      if (picked.size >= args.limit) break;
      picked.add(j.id);
    }
  }
  store.deleteJobs(args.namespace, picked);
  return picked.size;
}
