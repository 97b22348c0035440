import type { Queryable } from './Db';

/** acta.release_passes: passes a registration took are due again at once (its worker stopped before running them). */
export async function releasePasses(q: Queryable, namespace: string, passes: string[]): Promise<void> {
  await q.query('select acta.release_passes($1, $2)', [namespace, passes]);
}
