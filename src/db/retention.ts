import type { Db } from './Db';

/** Per-state ages of finished rows, ms (null: that state is kept). */
export interface RetentionAges {
  succeededMs: number | null;
  cancelledMs: number | null;
  failedMs: number | null;
}

/**
 * acta.prune_jobs in a transaction of its own under `SET LOCAL statement_timeout` (`timeoutMs`):
 * deletes up to `limit` finished rows older than their state's age, with their attempts and
 * steps; returns how many. A batch that runs past its timeout rolls back and rejects with SQLSTATE
 * 57014 (query_canceled), deleting nothing.
 */
export async function pruneJobs(db: Db, args: { namespace: string; ages: RetentionAges; limit: number; timeoutMs: number }): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.query(`select set_config('statement_timeout', $1, true)`, [`${args.timeoutMs}ms`]);
    const { rows } = await tx.query<{ n: number }>('select acta.prune_jobs($1, $2, $3, $4, $5) as n', [
      args.namespace,
      args.ages.succeededMs,
      args.ages.cancelledMs,
      args.ages.failedMs,
      args.limit,
    ]);
    return rows[0].n;
  });
}
