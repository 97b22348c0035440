import type { Queryable } from './Db';

/** acta.release_recovery_pass: the pass a registration took is due again at once (its worker stopped before running it). */
export async function releaseRecoveryPass(q: Queryable, namespace: string): Promise<void> {
  await q.query('select acta.release_recovery_pass($1)', [namespace]);
}
